"""Client side of the ``socket`` transport: one persistent TCP connection, reopened on demand."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from rpent.rpc.errors import RpcConnectionError, RpcProtocolError, RpcTimeout
from rpent.rpc.transport.endpoint import Endpoint
from rpent.rpc.transport.framing import (
    ConnectionClosed,
    FrameError,
    encode_frame,
    recv_frame,
    send_encoded,
)
from rpent.rpc.transport.limits import DEFAULT_MAX_FRAME_BYTES

#: A pooled connection idle this long is closed instead of reused. Servers close idle connections
#: only after ServerLimits.idle_timeout_s (300 s by default), so a call never meets one being closed.
RETIRE_IDLE_S = 60.0


class SocketTransport:
    """A small pool of persistent connections: one per concurrent caller, reused when idle.

    A connection that failed or timed out mid-call is closed, never reused: its byte stream
    may hold half a frame. The next call opens a fresh one. One idle for RETIRE_IDLE_S is
    closed rather than reused.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        connect_timeout_s: float,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        max_idle: int = 8,
    ) -> None:
        self.endpoint = endpoint
        self.connect_timeout_s = connect_timeout_s
        self.max_frame_bytes = max_frame_bytes
        self.max_idle = max_idle
        self._idle: list[tuple[socket.socket, float]] = []  # (connection, idle since)
        self._lock = threading.Lock()
        self._closed = False

    def call(self, method: str, args: Sequence[Any], kwargs: Mapping[str, Any], timeout_s: float) -> tuple[str, Any]:
        """Send one request and return the raw reply ``("ok", result)`` or ``("error", {...})``."""
        where = {"endpoint": str(self.endpoint), "method": method}
        request = (method, tuple(args), dict(kwargs))
        try:
            chunks = encode_frame(request)  # fail on unpicklable arguments before touching a connection
        except Exception as exc:
            raise RpcProtocolError(f"arguments could not be pickled ({type(exc).__name__}: {exc})", **where) from None
        deadline = time.monotonic() + timeout_s
        sock = self._checkout(deadline, where)
        try:
            send_encoded(sock, chunks, deadline=deadline)
            reply = recv_frame(sock, max_bytes=self.max_frame_bytes, deadline=deadline)
        except TimeoutError:
            sock.close()
            raise RpcTimeout(f"no reply within {timeout_s:g} s", **where) from None
        except FrameError as exc:
            sock.close()
            raise RpcProtocolError(f"malformed reply: {exc}", **where) from None
        except (ConnectionClosed, OSError) as exc:
            sock.close()
            raise RpcConnectionError(
                f"connection lost during the call ({exc}); the server died or restarted", **where
            ) from None
        self._checkin(sock)
        if not (isinstance(reply, tuple) and len(reply) == 2 and reply[0] in ("ok", "error")):
            raise RpcProtocolError(f"unexpected reply of type {type(reply).__name__}", **where)
        return reply

    def _checkout(self, deadline: float, where: dict[str, str]) -> socket.socket:
        with self._lock:
            while self._idle:
                sock, since = self._idle.pop()
                if time.monotonic() - since < RETIRE_IDLE_S and not peer_closed(sock):
                    return sock
                sock.close()  # retired, or the server went away while this connection was idle
        timeout = min(self.connect_timeout_s, max(deadline - time.monotonic(), 0.001))
        try:
            sock = socket.create_connection((self.endpoint.host, self.endpoint.port), timeout=timeout)
        except TimeoutError:
            raise RpcTimeout(f"connecting took longer than {timeout:g} s", **where) from None
        except OSError as exc:
            raise RpcConnectionError(f"cannot connect ({exc}); is the server running?", **where) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _checkin(self, sock: socket.socket) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self.max_idle:
                self._idle.append((sock, time.monotonic()))
                return
        sock.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for sock, _ in idle:
            sock.close()


def peer_closed(sock: socket.socket) -> bool:
    """True if an idle connection was closed by the peer (an idle socket only turns readable then)."""
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True
