"""Helpers of the eval tests: ports, short temp dirs, process trees, bounded waits."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def running_head(argv: list[str], *, env: dict[str, str], cwd: Path | None, temp_dir: Path,
                 start_timeout_s: float = 120) -> Iterator[subprocess.Popen]:
    """A `ray start --head ... --block` (argv) logging to temp_dir/head.log, once it says it started; stopped after.

    --block keeps the head our child, in a session of its own: SIGTERM to it stops what it started (a
    plain `ray stop` would stop every Ray on the machine), SIGKILL to its session only what it started.
Used by the eval tests and bench/bench_eval.py.
    """
    log_path = temp_dir / "head.log"
    with log_path.open("w") as log:
        head = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + start_timeout_s
            while "Ray runtime started" not in log_path.read_text():
                assert head.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, f"ray head did not start in {start_timeout_s} s"
                time.sleep(0.2)
            yield head
        finally:
            head.send_signal(signal.SIGTERM)
            try:
                head.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(head.pid, signal.SIGKILL)
                head.wait(timeout=10)
