"""What the HTTP RPC server refuses before any handler runs, and how every refusal is worded (JSON).

A web page the operator happens to open can make the browser send requests to 127.0.0.1; it
cannot set a JSON content type without a CORS preflight (which this server never grants), it
cannot hide its ``Origin``, and through DNS rebinding it can reach the port only under its own
host name. So a request is served only if its ``Content-Type`` is ``application/json`` (415
otherwise), its ``Origin``, when present, is this server's own (403), and its ``Host`` is a
loopback name (421), unless the server was bound off loopback with ``allow_remote``, where the
names peers use are not known in advance.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from http import HTTPStatus
from typing import Any

import orjson

from rpent.loopback import is_loopback
from rpent.rpc.transport.limits import ServerCounters

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

JSON = "application/json"


def error_body(kind: str, message: str, tb: str = "") -> bytes:
    """The body of every error reply: ``{"ok": false, "error": {"type", "message", "traceback"}}``."""
    return orjson.dumps({"ok": False, "error": {"type": kind, "message": message, "traceback": tb}})


def raw_response(status: int, body: bytes) -> bytes:
    """A complete HTTP/1.1 JSON response that closes the connection, for writing straight to a transport."""
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\ncontent-type: {JSON}\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class RequestGuard:
    """ASGI middleware that answers forbidden requests itself (403, 415, 421 JSON)."""

    def __init__(
        self, app: ASGIApp | None = None, *, any_host: bool = False, counters: ServerCounters | None = None
    ) -> None:
        self.app = app
        self.any_host = any_host
        self.counters = counters

    @classmethod
    def for_bind(
        cls, host: str, *, allow_remote: bool, app: ASGIApp | None = None, counters: ServerCounters | None = None
    ) -> RequestGuard:
        """The guard a server bound on ``host`` uses: any Host name only off loopback with the opt-in."""
        return cls(app, any_host=allow_remote and not is_loopback(host), counters=counters)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, message) if the request must not be served, else None."""
        headers: dict[bytes, list[bytes]] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name, []).append(value)
        hosts = [v.decode("latin-1") for v in headers.get(b"host", [])]
        if len(hosts) != 1:
            return 421, f"Host: must be sent exactly once, got {len(hosts)}"
        host = hosts[0]
        if not self.any_host and not is_loopback(_host_name(host)):
            return 421, f"Host: {host!r} is not a loopback name (127.0.0.1, localhost or [::1]) of this server"
        for origin in (v.decode("latin-1") for v in headers.get(b"origin", [])):
            if origin.lower() != f"http://{host}".lower():
                return (
                    403,
                    f"Origin: {origin!r} is not this server's origin (http://{host}); cross-site calls are refused",
                )
        if scope["method"] == "POST":
            types = [v.decode("latin-1") for v in headers.get(b"content-type", [])]
            media = types[0].partition(";")[0].strip().lower() if len(types) == 1 else ""
            if media != JSON:
                got = repr(", ".join(types)) if types else "nothing"
                return 415, f"Content-Type: must be {JSON}, got {got}"
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert self.app is not None
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self.refusal(scope)
        if refused is None:
            await self.app(scope, receive, send)
            return
        status, message = refused
        if self.counters is not None:
            self.counters.add("rejected")
        body = error_body("RpcProtocolError", message)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", JSON.encode()), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})
