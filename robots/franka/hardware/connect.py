"""Connecting to franky objects without risking a hang.

A franky Robot or Gripper constructor blocks forever when another client already holds
the robot (seen against franky-sim), so construction runs in a daemon thread with a deadline.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

from rpent.runtime.arm import RuntimeFault

T = TypeVar("T")


def connect_with_timeout(factory: Callable[[], T], what: str, host: str, timeout_s: float) -> T:
    """Run `factory` in a daemon thread; raise RuntimeFault naming the host if it fails or hangs."""
    box: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = factory()
        except BaseException as exc:  # reported to the caller below
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name=f"connect-{what}-{host}", daemon=True).start()
    if not done.wait(timeout_s):
        raise RuntimeFault(
            f"could not connect to the Franka {what} at {host} within {timeout_s:.1f} s "
            "(is the robot reachable, FCI enabled, and no other client connected?)"
        )
    if "error" in box:
        exc = box["error"]
        raise RuntimeFault(f"could not connect to the Franka {what} at {host}: {exc}") from exc  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


class RobotLink:
    """The health of the connection to one robot host, shared by its arm and gripper clients.

    libfranka notices a robot that went away only through its 1 s UDP timeout, and a pending
    gripper command not at all (it waits for an answer that never comes). Both clients hold a TCP
    connection to the robot, though, and a robot (or franky-sim) that dies closes it: peeking at
    that socket tells at once, and once either client saw the link go, both fail fast with that cause.
    """

    def __init__(self, host: str) -> None:
        self.host = host
        self.lost: str | None = None
        self._sockets: list[socket.socket] = []

    def connections(self, port: int) -> set[str]:
        """Socket inodes of this machine's established connections to host:port (before connecting)."""
        return _established(self.host, port)

    def watch(self, port: int, before: set[str]) -> None:
        """Watch the one connection to host:port that appeared since `before` (else watch nothing)."""
        sock = _new_socket(self.host, port, before)
        if sock is not None:
            self._sockets.append(sock)

    def lost_fault(self, who: str, reason: str) -> RuntimeFault:
        """Record that the robot is gone (the first reason sticks) and the fault that says so."""
        if self.lost is None:
            self.lost = reason
        return RuntimeFault(f"{who}: lost connection to the robot at {self.host}: {self.lost}")

    def check(self, who: str) -> None:
        """Raise RuntimeFault naming the cause if the robot is known to be gone."""
        if self.lost is not None:
            raise self.lost_fault(who, self.lost)
        if any(_peer_closed(sock) for sock in self._sockets):
            raise self.lost_fault(who, "the robot closed the connection")

    def close(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()


def _peer_closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # open, nothing to read: alive
    except OSError:
        return True  # reset or otherwise broken


def _established(host: str, port: int) -> set[str]:
    """Inodes of established TCP connections to host:port (Linux /proc; empty elsewhere)."""
    try:
        wanted = _hex_endpoint(host, port)
        with open("/proc/net/tcp") as table:
            next(table)
            return {f[9] for f in (line.split() for line in table) if f[2] == wanted and f[3] == "01"}
    except (OSError, ValueError, StopIteration, IndexError):
        return set()


def _new_socket(host: str, port: int, before: set[str]) -> socket.socket | None:
    """A duplicate of the connection this process opened to host:port since `before`, if exactly one."""
    new = _established(host, port) - before
    if len(new) != 1:
        return None  # none, or ambiguous: rather watch nothing than the wrong connection
    inode = f"socket:[{new.pop()}]"
    try:
        for fd in os.listdir("/proc/self/fd"):
            try:
                if os.readlink(f"/proc/self/fd/{fd}") == inode:
                    return socket.fromfd(int(fd), socket.AF_INET, socket.SOCK_STREAM)
            except OSError:
                continue
    except OSError:
        pass
    return None


def _hex_endpoint(host: str, port: int) -> str:
    packed = socket.inet_aton(socket.gethostbyname(host))
    return f"{int.from_bytes(packed, 'little'):08X}:{port:04X}"
