"""Helpers of the eval tests: ports, short temp dirs, process trees, bounded waits."""

from __future__ import annotations

import socket
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOY_RECIPE = str(REPO / "robots/toy/recipes/red_block_in_bin.jsonl")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


MADE_TEMP_DIRS: list[Path] = []  # removed when the session ends (conftest)


def short_temp_dir(prefix: str) -> Path:
    # Ray's socket paths live under its temp dir and must stay below the 107-byte AF_UNIX limit.
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    MADE_TEMP_DIRS.append(path)
    return path


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc; no psutil here)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def wait_until(predicate, timeout_s: float, what: str, interval_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(interval_s)
