"""The ``http`` transport server: JSON over ``POST /call`` (starlette app served by uvicorn).

Request body: ``{"method": str, "args": [...], "kwargs": {...}}`` in the rpent.rpc codec,
sent with ``Content-Type: application/json``. Reply: 200 ``{"ok": true, "result": ...}``; on
failure ``{"ok": false, "error": {"type", "message", "traceback"}}`` with

- 400: malformed request (bad JSON, bad tags, call shape or arguments; the message names the
  field, e.g. ``kwargs.x.__ndarray__: shape ...``), or bytes that are not HTTP;
- 403 / 415 / 421: a cross-site ``Origin``, a body that is not JSON, a ``Host`` that is not a
  loopback name (see rpent.rpc.transport.http_guard);
- 404: no such method; 405: not ``POST /call`` or ``GET /healthz``;
- 408: the request stalled for ``read_timeout_s`` (the connection is then closed);
- 413: body over ``max_frame_bytes`` (declared, or counted while it streams);
- 500: the handler raised, or its result could not be encoded;
- 503: too many connections or calls at once (type ``RpcServerBusy``; the call never ran).

``GET /healthz`` answers without a body, for probes. Decoding, the handler and encoding run in
a worker thread: blocking robot or simulator I/O never runs on the event loop.
"""

from __future__ import annotations

import threading
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from rpent.rpc.facade import MalformedCall, MethodNotFound, RemoteFailure, RpcFacade
from rpent.rpc.transport import codec
from rpent.rpc.transport.endpoint import Endpoint
from rpent.rpc.transport.http_connections import guarded_protocol
from rpent.rpc.transport.http_guard import JSON, RequestGuard, error_body
from rpent.rpc.transport.limits import ServerLimits
from rpent.rpc.transport.server_base import RpcServer

_REQUEST_KEYS = frozenset(("method", "args", "kwargs"))


def _json(status: int, body: bytes) -> Response:
    return Response(body, status_code=status, media_type=JSON)


class HttpRpcServer(RpcServer):
    def __init__(
        self,
        facade: RpcFacade,
        endpoint: Endpoint,
        *,
        allow_remote: bool = False,
        limits: ServerLimits | None = None,
    ) -> None:
        super().__init__(facade, endpoint, protocol="http", opted_in=allow_remote, limits=limits)
        self._active = 0  # calls being received or handled; touched on the event loop only
        app = Starlette(
            routes=[
                Route("/call", self._call, methods=["POST"]),
                Route("/healthz", self._healthz, methods=["GET"]),
            ],
            exception_handlers={HTTPException: self._http_error, Exception: self._internal_error},
        )
        config = uvicorn.Config(
            RequestGuard.for_bind(endpoint.host, allow_remote=allow_remote, app=app, counters=self._counters),
            http=guarded_protocol(self.limits, self._counters),
            log_level="warning",
            access_log=False,
            lifespan="off",
            # Clients retire pooled connections long before this, so the two never race.
            timeout_keep_alive=self.limits.idle_timeout_s,
            timeout_graceful_shutdown=5,
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    def _open_connections(self) -> int:
        return len(self._uvicorn.server_state.connections)

    # -- handlers --------------------------------------------------------------------------
    async def _healthz(self, request: Request) -> Response:
        return _json(200, codec.dumps(self.facade.dispatch("healthz")))

    async def _call(self, request: Request) -> Response:
        limit = self.limits.max_active_calls
        if self._active >= limit:
            self._counters.add("refused")
            message = f"server busy: {self._active} calls in progress (the limit is {limit}); try again later"
            return _json(503, error_body("RpcServerBusy", message))
        self._active += 1
        try:
            return await self._receive_and_answer(request)
        finally:
            self._active -= 1

    async def _receive_and_answer(self, request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limits.max_frame_bytes):
            return self._too_large(declared)
        body = bytearray()
        try:
            async for chunk in request.stream():
                if len(body) + len(chunk) > self.limits.max_frame_bytes:
                    return self._too_large(f"more than {len(body) + len(chunk)}")
                body += chunk
        except ClientDisconnect:
            return Response(status_code=400)  # nobody is left to read it; the call never ran
        self._call_started()
        try:
            status, payload = await run_in_threadpool(self._handle, body)
        finally:
            self._call_finished()
        if 400 <= status < 500:
            self._counters.add("rejected")
        return _json(status, payload)

    def _too_large(self, size: str) -> Response:
        self._counters.add("rejected")
        message = f"request body of {size} bytes exceeds the limit of {self.limits.max_frame_bytes}"
        return _json(413, error_body("RpcProtocolError", message))

    def _handle(self, body: bytearray) -> tuple[int, bytes]:
        try:
            request = codec.loads(body)
        except codec.CodecError as exc:
            return 400, error_body("RpcProtocolError", f"{exc.where or 'body'}: {exc.reason}")
        if not isinstance(request, dict):
            kind = type(request).__name__
            return 400, error_body(
                "RpcProtocolError", f"body: must be a JSON object with method, args and kwargs, got {kind}"
            )
        unknown = sorted(set(request) - _REQUEST_KEYS)
        if unknown:
            message = f"body: unknown key {unknown[0]!r} (a request has method, args, kwargs)"
            return 400, error_body("RpcProtocolError", message)
        method: Any = request.get("method")
        try:
            result = self.facade.dispatch(method, request.get("args", []), request.get("kwargs", {}))
        except MethodNotFound as exc:
            return 404, error_body("RpcMethodNotFound", str(exc.args[0]))
        except MalformedCall as exc:
            return 400, error_body(exc.wire_type, str(exc))
        except Exception as exc:
            failure = RemoteFailure.from_exception(exc)
            return 500, error_body(failure.type, failure.message, failure.traceback)
        try:
            return 200, codec.dumps({"ok": True, "result": result})
        except codec.CodecError as exc:
            return 500, error_body("CodecError", f"reply of {method!r} could not be encoded: {exc}")

    async def _http_error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        self._counters.add("rejected")
        message = f"{request.method} {request.url.path}: {exc.detail} (this server answers POST /call and GET /healthz)"
        return _json(exc.status_code, error_body("RpcProtocolError", message))

    async def _internal_error(self, request: Request, exc: Exception) -> Response:
        return _json(500, error_body(type(exc).__name__, f"internal error of the RPC server: {exc}"))

    # -- lifecycle -------------------------------------------------------------------------
    def _start_serving(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"rpc-http {self.endpoint}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        # run() honours the configured loop (uvloop when installed), unlike asyncio.run(serve()).
        self._uvicorn.run(sockets=[self._listener])

    def _stop_serving(self, timeout_s: float) -> None:
        self._wait_idle(timeout_s)
        self._uvicorn.should_exit = True
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout_s)
        if self._thread is not None and self._thread.is_alive():
            self._uvicorn.force_exit = True
            self._thread.join(timeout_s)
        try:
            self._listener.close()
        except OSError:
            pass
