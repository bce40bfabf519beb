"""A software stop that holds: once triggered, every motion of the toolkit is refused until an operator
releases it, and a restarted toolkit comes up still stopped.

Anyone may trigger it (the model's `stop` tool, ROS `/toolkit/stop`, the dashboard, `rpent stop`); only
the operator's interfaces release it, and no tool does. The state is kept in JSON files written
atomically: the robot's (`<state_dir>/<robot>/stop_latch.json`), which outlives its runs, is read back
when a toolkit for that robot starts and is followed by every running one; the run record's
`stop_latch.json` is a copy. Each trigger and release is also returned to the caller as an event for
the run record and the dashboard.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rpent.record.atomic import write_json

log = logging.getLogger(__name__)

FILE_NAME = "stop_latch.json"
#: How often a running toolkit looks at its robot's latch file for a stop another process wrote.
WATCH_PERIOD_S = 0.05
#: The run record's line per stop and release.
EVENTS_FILE_NAME = "stop_events.jsonl"
#: Where a robot's latch outlives its runs unless RPENT_STATE_DIR says otherwise.
DEFAULT_STATE_DIR = Path("~/.local/state/rpent")


def state_dir_from_env() -> Path:
    """RPENT_STATE_DIR, else $XDG_STATE_HOME/rpent, else ~/.local/state/rpent."""
    if os.environ.get("RPENT_STATE_DIR"):
        return Path(os.environ["RPENT_STATE_DIR"]).expanduser()
    if os.environ.get("XDG_STATE_HOME"):
        return Path(os.environ["XDG_STATE_HOME"]).expanduser() / "rpent"
    return DEFAULT_STATE_DIR.expanduser()


def robot_latch(robot: str, state_dir: Path | None = None) -> StopLatch:
    """The latch of `robot`, kept in `<state_dir>/<robot>/stop_latch.json` (default: state_dir_from_env())."""
    return StopLatch((state_dir if state_dir is not None else state_dir_from_env()) / robot / FILE_NAME)


class StopLatched(Exception):
    """A motion was asked for while the latch holds; the message is the latch's one line."""


class StopLatch:
    """One robot's latch. Thread-safe. `path` is the robot's file, which outlives its runs (None: the latch
    lives in this process only); a latched state found there when the latch is made holds (a restart comes
    up still stopped)."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = None if path is None else Path(path)
        self._record_file: Path | None = None
        self._lock = threading.Lock()
        self._on_change: Callable[[dict[str, Any]], None] | None = None
        self._watcher: threading.Thread | None = None
        self._state: dict[str, Any] | None = None
        self._sync()
        if self.latched:
            log.warning("the stop latch read from %s holds: %s", self._path, self.line())

    def record_into(self, path: Path | None) -> None:
        """Keep the latch in the run record's `path` from now on, instead of the record before (a toolkit
        node opens a record per task; its latch outlives them all)."""
        with self._lock:
            self._record_file = None if path is None else Path(path)
            if self._state is not None:
                self._write(robot_file=False)

    def watch(self, on_change: Callable[[dict[str, Any]], None]) -> None:
        """Follow the robot's latch file: a stop or a release that another process writes there (`rpent
        stop`) takes hold here within WATCH_PERIOD_S, and `on_change(event)` is told (the newest caller's
        callback only: a toolkit node's toolkit of the moment). A latch kept nowhere has nothing to follow."""
        with self._lock:
            self._on_change = on_change
            if self._watcher is not None or self._path is None:
                return
            self._watcher = threading.Thread(target=self._follow, args=(self._path,), name="rpent-stop-latch",
                                             daemon=True)
            self._watcher.start()

    def unwatch(self, on_change: Callable[[dict[str, Any]], None]) -> None:
        """`on_change` no longer follows the file (its toolkit closed); with no one following, the watcher ends."""
        with self._lock:
            if self._on_change == on_change:
                self._on_change, self._watcher = None, None

    def _follow(self, path: Path) -> None:
        last = _stamp(path)
        while self._watcher is threading.current_thread():
            time.sleep(WATCH_PERIOD_S)
            stamp = _stamp(path)
            if stamp == last:
                continue
            last = stamp
            state = _read(path)
            if state is None:
                continue
            with self._lock:
                if state.get("latched") and not self.latched:
                    self._state = state
                    event = {"event": "stop", "by": state.get("by"), "at": state.get("at"),
                             "reason": state.get("reason"), "line": self.line(), "written_to": str(path)}
                elif not state.get("latched") and self.latched:
                    assert self._state is not None
                    event = {"event": "release", "by": state.get("released_by"), "at": state.get("released_at"),
                             "stopped_by": self._state.get("by"), "reason": self._state.get("reason"),
                             "written_to": str(path)}
                    self._state = state
                else:
                    continue  # our own write, or no change of state
                # The run record's copy only: writing the robot's file back could undo a newer write of the
                # process that wrote it (a release right after a stop).
                self._write(robot_file=False)
            log.warning("stop latch %s by %s (written to %s)", "released" if event["event"] == "release" else "latched",
                        event["by"], path)
            callback = self._on_change
            if callback is not None:
                try:
                    callback(event)
                except Exception:  # the latch holds all the same; the watcher goes on
                    log.exception("acting on the stop latch written to %s failed", path)

    @property
    def latched(self) -> bool:
        return self._state is not None and bool(self._state.get("latched"))

    def describe(self) -> dict[str, Any]:
        """What get_state and /toolkit/status show: {"latched": False} or the latch's who, when and why."""
        with self._lock:
            if not self.latched:
                return {"latched": False}
            assert self._state is not None
            return {**self._state, "line": self.line()}

    def line(self) -> str:
        """The one line every refused motion gets."""
        state = self._state or {}
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state.get("at", 0.0)))
        return (f"stopped by {state.get('by', '?')} at {at} ({state.get('reason') or 'no reason given'}): "
                f"an operator must release it")

    def check(self) -> None:
        """Raise StopLatched with the latch's line when it holds, as the robot's file says now (for motions
        outside a toolkit's calls: a dashboard's scene reset)."""
        with self._lock:
            self._sync()
            if self.latched:
                raise StopLatched(self.line())

    def trigger(self, by: str, reason: str) -> dict[str, Any]:
        """Latch (again: a second trigger keeps the first's who and when, and is recorded too); the event."""
        now = time.time()
        with self._lock:
            self._sync()
            if not self.latched:
                self._state = {"latched": True, "by": by, "at": now, "reason": reason}
                self._write()
            event = {"event": "stop", "by": by, "at": now, "reason": reason, "line": self.line()}
        log.warning("stop latched by %s: %s", by, reason)
        return event

    def release(self, by: str) -> dict[str, Any] | None:
        """Release the latch; the event, or None when it did not hold."""
        now = time.time()
        with self._lock:
            self._sync()
            if not self.latched:
                return None
            assert self._state is not None
            event = {"event": "release", "by": by, "at": now, "stopped_by": self._state.get("by"),
                     "reason": self._state.get("reason")}
            self._state = {"latched": False, "released_by": by, "released_at": now}
            self._write()
        log.warning("stop released by %s", by)
        return event

    def _sync(self) -> None:
        """Take the state another process wrote to the robot's file since (under the lock): a release
        acts on the stop that holds now, whoever latched it."""
        if self._path is not None:
            state = _read(self._path)
            if state is not None:
                self._state = state

    def _write(self, *, robot_file: bool = True) -> None:
        for path in (self._path if robot_file else None, self._record_file):
            if path is None:
                continue
            try:
                write_json(path, self._state)
            except OSError as exc:  # the latch still holds in this process; say where it is not kept
                log.error("the stop latch could not be written to %s: %s", path, exc)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    """What changes when the file is written again (atomically: a new inode)."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _read(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        # A latch file that cannot be read might have held a stop: refuse to start moving on a guess.
        log.error("the stop latch file %s cannot be read (%s): treating it as latched", path, exc)
        return {"latched": True, "by": "an unreadable latch file", "at": time.time(), "reason": f"{path}: {exc}"}
    return state if isinstance(state, dict) else None
