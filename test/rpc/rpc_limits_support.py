"""Raw-socket helpers for the tests that hold RPC servers to their limits (bytes, connections, time)."""

from __future__ import annotations

import socket
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from rpent.rpc import RpcServer


def connect(port: int, timeout_s: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout_s)


def read_to_eof(sock: socket.socket, limit: int = 1 << 20) -> bytes:
    """Everything the server sends until it closes the connection (the socket's timeout bounds the wait)."""
    data = b""
    while len(data) < limit:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def wait_for(predicate: Callable[[], Any], timeout_s: float = 10.0, what: str = "condition") -> Any:
    """Poll a server-side figure that has no event to wait on (its counters), within a bound."""
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached within {timeout_s} s")
        time.sleep(0.01)
    return value


def wait_counter(server: RpcServer, name: str, at_least: int, timeout_s: float = 10.0) -> dict[str, int]:
    return wait_for(
        lambda: (c := server.counters())[name] >= at_least and c, timeout_s, f"counter {name} >= {at_least}"
    )


def peak_traced_bytes_of_stalled_peers(port: int, opening: bytes, answered: Callable[[socket.socket], None],
                                       peers: int = 5) -> int:
    """Open `peers` connections that each send `opening` (a header declaring far more than follows) and stop;
    `answered` checks what the server sent one of them. Returns the peak of Python's allocations meanwhile,
    which shows whether the server reserved what was declared or only what arrived."""
    socks: list[socket.socket] = []
    tracemalloc.start()
    try:
        for _ in range(peers):
            socks.append(connect(port))
            socks[-1].sendall(opening)
        for sock in socks:
            answered(sock)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        for sock in socks:
            sock.close()
