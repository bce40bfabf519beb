"""The record's atomic writer: a file is replaced whole or not at all, so a reader (or a run killed
mid-write) never sees half of result.json, transcript.json or a recipe. And a durable append of one JSON
line, for a log whose every line must survive a crash right after it (stop_events.jsonl)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rpent.record.values import json_default


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary file beside `path`, fsynced, then renamed over it; missing folders are made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes 0600 files; a run's record is shared like any other file (umask applies).
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, payload: Any) -> None:
    """`payload` as indented JSON (odd values through json_default), written atomically."""
    write_text_atomic(path, json.dumps(payload, indent=2, ensure_ascii=False, default=json_default) + "\n")


def append_json_line(path: Path, entry: Any) -> None:
    """One JSON line appended to `path` and fsynced before this returns."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, ensure_ascii=False, default=json_default) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
