"""Run logging: everything to run.log, a readable (or JSON) progress stream on stderr."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

from rpent.tools.record import Segment
from rpent.tools.result import _json_default


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
        return json.dumps(entry, default=_json_default)


def setup_console(*, quiet: bool = False, json_logs: bool = False) -> None:
    root = logging.getLogger()
    root.setLevel(logging.DEBUG)
    for handler in list(root.handlers):
        if getattr(handler, "_rpent", False):
            root.removeHandler(handler)
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.WARNING if quiet else logging.INFO)
    console.setFormatter(JsonFormatter() if json_logs else logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    console._rpent = True  # type: ignore[attr-defined]
    # Libraries chatty at INFO (HTTP clients, MuJoCo loaders) stay in run.log only.
    console.addFilter(lambda record: record.name.startswith(("rpent", "robots", "__main__")) or record.levelno >= logging.WARNING)
    root.addHandler(console)


def add_run_log(segment: Segment) -> logging.Handler:
    """Log everything to the record's run.log, which every segment appends to after a header of its own."""
    handler = logging.FileHandler(segment.output_dir / "run.log", encoding="utf-8")
    resumed = " (continued with --resume)" if segment.number > 1 else ""
    handler.stream.write(f"===== segment {segment.number}{resumed}, started {time.strftime('%Y-%m-%d %H:%M:%S')}, "
                         f"pid {os.getpid()} =====\n")
    handler.flush()
    handler.setLevel(logging.DEBUG)
    handler.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S"))
    handler._rpent = True  # type: ignore[attr-defined]
    logging.getLogger().addHandler(handler)
    return handler


class ProgressSink:
    """Logs one line per finished tool call (name, duration, outcome). Not the dashboard: no clips."""

    enabled = True
    clips = False

    def __init__(self, logger: logging.Logger) -> None:
        self.log = logger
        self.started = time.monotonic()

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        if kind == "tool_finished":
            outcome = f"error: {payload['error']}" if payload.get("error") else "ok"
            self.log.info(
                "tool %s (%.2f s) %s",
                payload["tool"],
                payload.get("duration_s", 0.0),
                outcome,
                extra={"rpent": {"event": kind, "tool": payload["tool"], "duration_s": payload.get("duration_s"), "error": payload.get("error")}},
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
