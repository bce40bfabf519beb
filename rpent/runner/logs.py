"""Run logging on the terminal: a readable (or JSON) progress stream on stderr (run.log is the
record's: rpent.record.run_log)."""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from rpent.record.run_log import run_log_attached
from rpent.record.values import json_default
from rpent.tools.result import call_status, describe_call


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "t": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = getattr(record, "rpent", None)
        if extra:
            entry.update(extra)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=json_default)


class ConsoleFormatter(logging.Formatter):
    """One line per record on the terminal. While a run.log is attached, a traceback goes there only:
    the operator reads what happened, the developer reads run.log."""

    def format(self, record: logging.LogRecord) -> str:
        if not record.exc_info or not run_log_attached():
            return super().format(record)
        exc = record.exc_info[1]
        brief = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        line = super().format(brief)
        detail = f"{type(exc).__name__}: {exc}" if exc is not None else ""
        if detail and detail not in line:
            line = f"{line}: {detail}"
        return f"{line} (traceback in run.log)"


class ConsoleJsonFormatter(JsonFormatter):
    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and run_log_attached():
            exc = record.exc_info[1]
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None,
                                            "rpent": {**(getattr(record, "rpent", None) or {}),
                                                      "error": f"{type(exc).__name__}: {exc}", "traceback": "run.log"}})
        return super().format(record)


def setup_console(*, quiet: bool = False, json_logs: bool = False) -> None:
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    for handler in list(root.handlers):
        if getattr(handler, "_rpent", False):
            root.removeHandler(handler)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.WARNING if quiet else logging.INFO)
    console.setFormatter(ConsoleJsonFormatter() if json_logs else ConsoleFormatter("%(asctime)s %(message)s", "%H:%M:%S"))
    console._rpent = True  # type: ignore[attr-defined]
    # Libraries chatty at INFO (HTTP clients, MuJoCo loaders) stay in run.log only.
    console.addFilter(lambda record: record.name.startswith(("rpent", "robots", "__main__")) or record.levelno >= logging.WARNING)
    root.addHandler(console)


class ProgressSink:
    """Logs one line per finished tool call (name, duration, outcome). Not the dashboard: no clips."""

    enabled = True
    clips = False

    def __init__(self, logger: logging.Logger) -> None:
        self.log = logger
        self.started = time.monotonic()

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "tool_finished" and not payload.get("refused"):  # a refusal has its own warning line
            unmet = [name for name, value in (payload.get("outcome") or {}).items() if not value]
            status = payload.get("status") or call_status(payload.get("error"), unmet)
            # A call that ran but did not do what it was asked (a grasp that closed on nothing) stands out.
            self.log.log(
                logging.WARNING if status == "failed" else logging.INFO,
                "tool %s (%.2f s) %s",
                payload["tool"],
                payload.get("duration_s", 0.0),
                payload.get("status_text") or describe_call(payload.get("error"), unmet),
                extra={"rpent": {"event": kind, "tool": payload["tool"], "duration_s": payload.get("duration_s"),
                                 "status": status, "error": payload.get("error"), "outcome": payload.get("outcome")}},
            )
        elif kind == "finish":
            self.log.info("finish accepted: %s", payload.get("finish_result", {}).get("status"))


class FanOutSink:
    """Publishes to several sinks (progress log + dashboard)."""

    def __init__(self, *sinks: Any) -> None:
        self.sinks = [s for s in sinks if s is not None and getattr(s, "enabled", True)]
        self.enabled = bool(self.sinks)
        self.clips = any(getattr(s, "clips", True) for s in self.sinks)

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        for sink in self.sinks:
            try:
                sink.publish(kind, payload)
            except Exception:
                logging.getLogger(__name__).exception("event sink %r failed", sink)
