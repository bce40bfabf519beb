"""steps.jsonl: one line per tool call, appended and flushed as each call ends, so a killed run keeps
every call that completed."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from rpent.tools.result import _json_default


class StepLog:
    def __init__(self, path: Path, *, segment: int = 1) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        # A resumed record appends its segments to one file: every line says which segment it belongs to.
        self.segment = segment
        self._lock = threading.Lock()
        # Line-buffered append: each record reaches the OS as one write.
        self._file = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 - lives as long as the toolkit

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps({"segment": self.segment, **record}, ensure_ascii=False, default=_json_default) + "\n"
        with self._lock:
            if self._file.closed:
                return
            self._file.write(line)
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()


def read_steps(path: Path) -> list[dict[str, Any]]:
    """Read a steps.jsonl, ignoring a torn last line left by a crash mid-write."""
    records = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
