"""franky-sim in a subprocess (`python -m robots.franka.sim`), for tests that connect over real FCI
from outside the simulator's process or kill the simulator mid-motion."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

SIM_PORTS = (1337, 1338)  # franky-sim's arm and hand on each host


def free_sim_hosts(first: int, last: int, count: int = 1) -> list[str]:
    """`count` addresses among 127.0.0.first-last where both franky-sim ports are free now.

    Each test file picks from a range of its own, so that test files run at the same time do not collide.
    """
    hosts = []
    for b in range(first, last + 1):
        try:
            for port in SIM_PORTS:
                with socket.socket() as probe:
                    probe.bind((f"127.0.0.{b}", port))
        except OSError:
            continue
        hosts.append(f"127.0.0.{b}")
        if len(hosts) == count:
            return hosts
    raise AssertionError(f"no {count} free addresses for franky-sim in 127.0.0.{first}-{last}")


@contextmanager
def franka_sim_process(*hosts: str, ready_timeout_s: float = 60.0) -> Iterator[tuple[subprocess.Popen, str]]:
    """Start the simulator on `hosts` (127.0.0.x addresses of the test's own); yields (process, first host).

    The process is killed on exit, also when the test killed it already.
    """
    proc = subprocess.Popen(
        [sys.executable, "-m", "robots.franka.sim", *(f"--host={host}" for host in hosts)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        line: list[str] = []
        # readline has no timeout of its own: a simulator that never says READY must not hang the test.
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(ready_timeout_s)
        assert line and line[0].startswith("READY "), f"simulator did not start: {line}"
        yield proc, line[0].split()[1]
    finally:
        proc.kill()
        proc.wait(10)
