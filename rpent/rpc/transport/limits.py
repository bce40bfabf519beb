"""How much of a server one peer may hold, and the counts that show the limits at work.

Both transports share these limits. Memory for a request is only ever reserved as its bytes
arrive (at most twice what has arrived, in bounded steps), up to ``max_frame_bytes``; time is
bounded by ``read_timeout_s`` inside a request and ``idle_timeout_s`` between requests; and
``max_connections`` (plus, for HTTP, ``max_active_calls``) caps how many peers are served at once.
So the most a server can be made to hold is about ``max_connections x max_frame_bytes`` (socket)
or ``max_active_calls x max_frame_bytes`` (HTTP), and only while those bytes keep arriving.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, fields

DEFAULT_MAX_FRAME_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class ServerLimits:
    """Limits of one RPC server (constructor parameters of both transports' servers).

    - ``max_frame_bytes``: largest request (socket frame, HTTP body); larger ones are refused.
    - ``max_connections``: open connections at once; the next one is refused with a clear error
      (socket: an ``RpcServerBusy`` error frame, HTTP: 503 JSON) and closed.
    - ``max_active_calls``: HTTP requests being received or handled at once (503 past it); the
      socket server handles one request per connection, so its connection cap is its call cap.
    - ``read_timeout_s``: longest wait for the next bytes once a request has begun; a peer that
      stalls mid-request is sent an error and dropped. Handlers may run as long as they need.
    - ``idle_timeout_s``: longest wait for a new request on an open connection; clients retire
      pooled connections well before the default, so the two never race.
    """

    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    max_connections: int = 64
    max_active_calls: int = 8
    read_timeout_s: float = 20.0
    idle_timeout_s: float = 300.0

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"{spec.name}: must be a number > 0, got {value!r}")
            if spec.type == "int" and not isinstance(value, int):
                raise ValueError(f"{spec.name}: must be an integer, got {value!r}")


class ServerCounters:
    """What a server refused or dropped since it started (thread-safe; read with ``snapshot``).

    - ``refused``: connections or calls turned away because the server was at a cap.
    - ``dropped_idle``: connections closed after ``idle_timeout_s`` without a request.
    - ``dropped_stalled``: connections closed after a request stalled for ``read_timeout_s``.
    - ``rejected``: malformed or forbidden requests answered with an error.
    """

    NAMES = ("refused", "dropped_idle", "dropped_stalled", "rejected")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(self.NAMES, 0)

    def add(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
