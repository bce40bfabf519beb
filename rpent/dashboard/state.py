"""The dashboard's view of a session, kept in step with the event stream.

`DashboardSink` is the `DashboardEventSink` the dashboard hands to the runtime, toolkit and
planner. Under one lock it folds each event into `DashboardState` and appends it to the bus, so
a state snapshot always says exactly which event id it includes: a browser loads the snapshot,
then applies only events with a higher id.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rpent.dashboard.bus import EventBus
from rpent.dashboard.interaction import OperatorInteraction
from rpent.record.values import json_default
from rpent.tools.result import truncate_utf8

MAX_TEXT_CHARS = 200_000


def artifact_url(task_id: str, output_dir: Path, path: str | Path | None) -> str | None:
    """The dashboard URL of a file inside a task's output directory (None for anything outside)."""
    if not path:
        return None
    try:
        relative = Path(path).resolve().relative_to(output_dir.resolve())
    except ValueError:
        return None
    return f"/artifacts/{quote(task_id)}/{quote(relative.as_posix())}"


def _short_json(value: Any, limit: int = 4000) -> str:
    """A tool's result as text for the timeline (the full result is in steps.jsonl)."""
    return truncate_utf8(json.dumps(value, default=json_default, ensure_ascii=False), limit)


ACTIVE_CALL = ("running", "awaiting_approval")


def latch_view(event: dict[str, Any]) -> dict[str, Any]:
    """What the page shows of a stop_latch event: latched with its line, or released and by whom."""
    if event.get("event") == "stop":
        return {"latched": True, "line": event.get("line"), "by": event.get("by"), "reason": event.get("reason")}
    return {"latched": False, "released_by": event.get("by")}


def _row(task: dict[str, Any], call_id: Any) -> dict[str, Any] | None:
    return next((r for r in reversed(task["timeline"]) if r["call_id"] == call_id), None)


def image_labels(result: Any, count: int, channels: list[str]) -> list[str]:
    """Which camera took each of a call's `count` images: the names the result's `cameras` list
    gives (one entry per image, in order), else the robot's frame channels in order when there are
    as many; an empty name where neither says."""
    cameras = result.get("cameras") if isinstance(result, dict) else None
    if isinstance(cameras, list) and len(cameras) == count and all(isinstance(c, dict) for c in cameras):
        return [str(c.get("name") or "") for c in cameras]
    return list(channels) if len(channels) == count else [""] * count


class DashboardState:
    """Plain data, changed only through `apply` (always under the sink's lock)."""

    def __init__(self, robot: str, components: list[dict[str, Any]]) -> None:
        self.robot = robot
        self.session: dict[str, Any] = {"status": "starting", "error": None, "reason": None}
        self.components = {c["name"]: {**c, "status": "stopped", "detail": ""} for c in components}
        self.tasks: list[dict[str, Any]] = []
        self.task: dict[str, Any] | None = None
        self.requests: dict[str, dict[str, Any]] = {}
        self.stop_latch: dict[str, Any] = {"latched": False}

    def apply(self, kind: str, p: dict[str, Any]) -> None:
        task = self.task
        if kind == "stop_latch":  # the robot's latched stop (rpent.tools.stop_latch), whoever moved it
            self.stop_latch = latch_view(p)
            return
        if kind == "session":
            self.session = {"status": p["status"], "error": p.get("error"), "reason": p.get("reason")}
        elif kind == "component":
            row = self.components.setdefault(p["name"], {"name": p["name"], "label": p["name"], "shared": True})
            row.update(status=p["status"], detail=p.get("detail", ""))
        elif kind == "task_started":
            self.task = {
                "id": p["task_id"], "fields": p.get("fields", {}), "planner": p.get("planner"), "recipe": p.get("recipe"),
                "reset": {"status": "running" if p.get("reset") else "skipped"}, "status": "running",
                "started": p.get("started"), "ended": None, "timeline": [], "text": "", "messages": [], "notes": [],
                "counters": {"tool_calls": 0, "errors": 0, "turns": None, "tokens": None},
                "finish": None, "solved": None, "summary": None, "artifacts": {},
            }
            self.tasks.append({"id": p["task_id"], "task": p.get("fields", {}).get("task"), "status": "running"})
        elif task is None or p.get("task_id") not in (None, task["id"]):
            self._apply_global(kind, p)
        elif kind == "tool_started":
            task["timeline"].append({"call_id": p["call_id"], "tool": p["tool"], "arguments": p.get("arguments"),
                                     "status": "running", "started": p.get("t")})
        elif kind == "tool_stage":
            row = _row(task, p["call_id"])
            if row is not None and row["status"] in ACTIVE_CALL:
                # What a running call waits for: the operator (a motion approval), or its own work.
                row["status"] = "awaiting_approval" if p.get("stage") == "awaiting_approval" else "running"
        elif kind == "tool_finished":
            row = _row(task, p["call_id"])
            if row is None:
                row = {"call_id": p["call_id"], "tool": p["tool"], "arguments": p.get("arguments")}
                task["timeline"].append(row)
            status = p.get("status") or ("error" if p.get("error") else "ok")
            row.update(status=status, status_text=p.get("status_text"), duration_s=p.get("duration_s"),
                       error=p.get("error"), images=p.get("image_urls", []), image_labels=p.get("image_labels", []),
                       clip=p.get("clip_url"), result=p.get("result"))
            task["counters"]["tool_calls"] += 1
            task["counters"]["errors"] += 1 if status in ("error", "failed") else 0
        elif kind == "scene_reset":
            task["reset"] = {k: v for k, v in p.items() if k in ("status", "label", "detail", "error")}
        elif kind == "planner_text":
            task["text"] = (task["text"] + p.get("text", ""))[-MAX_TEXT_CHARS:]
        elif kind == "finish":
            task["finish"] = p.get("finish_result")
        elif kind == "counters":
            task["counters"].update(turns=p.get("turns"), tokens=p.get("tokens"))
        elif kind == "operator_message":
            task["messages"].append(f"message: {p.get('text')}")
        elif kind == "operator_note":
            task["notes"].append(p.get("text"))
            task["messages"].append(f"note: {p.get('text')}")
        elif kind == "abort_requested":
            task["status"] = "aborting"
        elif kind == "task_ended":
            summary = p.get("summary") or {}
            task.update(status=summary.get("status", "error"), ended=p.get("ended"), summary=summary,
                        solved=summary.get("solved"), finish=summary.get("finish_result") or task["finish"],
                        artifacts=p.get("artifacts", {}))
            task["counters"].update(turns=summary.get("turns"), tokens=(summary.get("usage") or {}).get("total_tokens"))
            for row in self.tasks:
                if row["id"] == task["id"]:
                    row.update(status=task["status"], finish_status=summary.get("finish_status"), solved=task["solved"],
                               disagreement=summary.get("disagreement"), stop_reason=summary.get("stop_reason"))
        else:
            self._apply_global(kind, p)

    def _apply_global(self, kind: str, p: dict[str, Any]) -> None:
        if kind == "operator_request":
            self.requests[p["id"]] = p
        elif kind == "operator_request_closed":
            self.requests.pop(p["id"], None)
            if self.task is not None:
                answer = f" ({p['answer']})" if p.get("answer") else ""
                self.task["messages"].append(f"request {p['kind']}: {p['outcome']}{answer}")

    def snapshot(self) -> dict[str, Any]:
        return copy.deepcopy({
            "robot": self.robot, "session": self.session, "components": list(self.components.values()),
            "tasks": self.tasks, "task": self.task, "requests": list(self.requests.values()),
            "stop_latch": self.stop_latch,
            "server_time": time.time(),  # the page counts approval deadlines down on the server's clock
        })


class DashboardSink:
    """The dashboard's `DashboardEventSink`: events go into the state and onto the bus, never blocking."""

    enabled = True
    clips = True  # per-action clips are linked from the timeline

    def __init__(self, bus: EventBus, state: DashboardState, channels: list[str] | None = None) -> None:
        self.bus = bus
        self.state = state
        self.channels = list(channels or [])  # the robot's frame channels, in order (image labels)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._task: tuple[str, Path] | None = None
        self.interaction = OperatorInteraction(self.publish)

    def set_task(self, task_id: str | None, output_dir: Path | None = None) -> None:
        with self._lock:
            self._task = (task_id, output_dir) if task_id is not None and output_dir is not None else None

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        payload = dict(payload)
        payload.setdefault("t", time.time())
        with self._lock:
            if self._task is not None:
                task_id, output_dir = self._task
                payload.setdefault("task_id", task_id)
                if kind == "tool_finished":
                    images = payload.get("images") or []
                    labels = image_labels(payload.get("result"), len(images), self.channels)
                    shown = [(u, label) for u, label in ((artifact_url(task_id, output_dir, p), label)
                                                         for p, label in zip(images, labels, strict=True)) if u]
                    payload["image_urls"] = [u for u, _ in shown]
                    payload["image_labels"] = [label for _, label in shown]
                    payload["clip_url"] = artifact_url(task_id, output_dir, payload.get("clip"))
                    payload["result"] = _short_json(payload.get("result"))
            self.state.apply(kind, payload)
            self.bus.publish(kind, payload)
            self._changed.notify_all()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return self._snapshot_locked()

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout_s: float) -> dict[str, Any] | None:
        """Block until a snapshot satisfies `predicate` (re-checked after every event); None on timeout."""
        found: list[dict[str, Any]] = []

        def check() -> bool:
            snapshot = self._snapshot_locked()
            if predicate(snapshot):
                found.append(snapshot)
                return True
            return False

        with self._changed:
            self._changed.wait_for(check, timeout_s)
        return found[0] if found else None

    def _snapshot_locked(self) -> dict[str, Any]:
        snapshot = self.state.snapshot()
        snapshot["last_event_id"] = self.bus.last_id
        return snapshot
