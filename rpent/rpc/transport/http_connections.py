"""Connections of the HTTP RPC server: a cap on how many are open, and timeouts for stalls and idlers.

uvicorn bounds what it buffers per connection (it stops reading past 64 KiB the app has not
taken) but has no read timeout and serves any number of connections. This subclass of its
httptools protocol adds, per connection:

- past ``max_connections``: a 503 JSON answer at once, then the connection is closed (after a
  short linger that discards input, so the refusal is not lost to a TCP reset);
- once a request has begun (a byte of it arrived), every wait for more is bounded by
  ``read_timeout_s``; a stall gets 408 JSON and the connection is closed;
- between requests (and before the first) the wait is bounded by ``idle_timeout_s``;
- while a handler runs, nothing is timed: a long simulator step is not a stalled peer;
- bytes that are not HTTP get 400 JSON instead of uvicorn's plain text.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from rpent.rpc.transport.http_guard import error_body, raw_response
from rpent.rpc.transport.limits import ServerCounters, ServerLimits

# Long enough for a refused peer's request to arrive and be discarded, short enough to hold little.
_REFUSAL_LINGER_S = 1.0


def guarded_protocol(limits: ServerLimits, counters: ServerCounters) -> type[asyncio.Protocol]:
    """The protocol class for one server's uvicorn Config (``http=``), bound to its limits and counters."""

    class GuardedHttpProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._timer: asyncio.TimerHandle | None = None
            self._handling = False
            self._refused = False

        # -- the cap ---------------------------------------------------------------------
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= limits.max_connections:
                self._refuse(transport)
                return
            super().connection_made(transport)
            self._arm(limits.idle_timeout_s, self._idle_expired)

        def _refuse(self, transport: asyncio.Transport) -> None:
            self._refused = True
            self.transport = transport
            counters.add("refused")
            n = limits.max_connections
            message = f"server busy: {n} connections open (the limit is {n}); try again later"
            transport.write(raw_response(503, error_body("RpcServerBusy", message)))
            if transport.can_write_eof():
                transport.write_eof()
            self._timer = self.loop.call_later(_REFUSAL_LINGER_S, transport.close)

        # -- timing ----------------------------------------------------------------------
        def data_received(self, data: bytes) -> None:
            if self._refused:
                return  # discarded: the answer is already out
            self._cancel_timer()
            if not self._handling:
                self._arm(limits.read_timeout_s, self._stalled)
            super().data_received(data)

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._cancel_timer()
            if self.cycle is not None and self.cycle.response_complete:
                # The answer went out before the body was read (413, 503): the rest was discarded.
                self._arm(limits.idle_timeout_s, self._idle_expired)
            else:
                self._handling = True

        def on_response_complete(self) -> None:
            self._handling = bool(self.pipeline)  # a pipelined request starts being handled now
            super().on_response_complete()  # arms uvicorn's keep-alive timer: our idle timeout

        def timeout_keep_alive_handler(self) -> None:
            if not self.transport.is_closing():
                counters.add("dropped_idle")
            super().timeout_keep_alive_handler()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_timer()
            if not self._refused:
                super().connection_lost(exc)

        def pause_writing(self) -> None:
            if not self._refused:
                super().pause_writing()

        def resume_writing(self) -> None:
            if not self._refused:
                super().resume_writing()

        def _arm(self, delay_s: float, callback: Any) -> None:
            self._cancel_timer()
            self._timer = self.loop.call_later(delay_s, callback)

        def _cancel_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _idle_expired(self) -> None:
            self._timer = None
            if not self.transport.is_closing():
                counters.add("dropped_idle")
                self.transport.close()

        def _stalled(self) -> None:
            self._timer = None
            if self.transport.is_closing():
                return
            counters.add("dropped_stalled")
            cycle = self.cycle
            if cycle is None or not cycle.response_started or cycle.response_complete:
                message = (
                    f"stalled: no bytes for {limits.read_timeout_s:g} s in the middle of a request; "
                    "closing the connection"
                )
                self.transport.write(raw_response(408, error_body("RpcProtocolError", message)))
            self.transport.close()

        # -- bytes that are not HTTP -----------------------------------------------------
        def send_400_response(self, msg: str) -> None:
            counters.add("rejected")
            body = error_body("RpcProtocolError", f"not an HTTP request ({msg.rstrip('.')})")
            self.transport.write(raw_response(400, body))
            self.transport.close()

    return GuardedHttpProtocol
