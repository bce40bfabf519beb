"""The ``http`` transport server: JSON over ``POST /call`` (starlette app served by uvicorn).

Request body: ``{"method": str, "args": [...], "kwargs": {...}}`` in the rpent.rpc codec.
Reply: 200 ``{"ok": true, "result": ...}``; on failure ``{"ok": false, "error": {"type",
"message", "traceback"}}`` with 500 (handler raised), 404 (no such method), 400 (malformed
request) or 413 (body over the size limit). ``GET /healthz`` answers without a body for probes.

Decoding, the handler and encoding run in a worker thread: blocking robot or simulator I/O
never runs on the event loop.
"""

from __future__ import annotations

import threading
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from rpent.rpc import codec
from rpent.rpc.endpoint import Endpoint
from rpent.rpc.facade import MethodNotFound, RemoteFailure, RpcFacade
from rpent.rpc.framing import DEFAULT_MAX_FRAME_BYTES
from rpent.rpc.server_base import RpcServer

_JSON = "application/json"


def _error_body(kind: str, message: str, tb: str = "") -> bytes:
    return codec.dumps({"ok": False, "error": {"type": kind, "message": message, "traceback": tb}})


class HttpRpcServer(RpcServer):
    def __init__(
        self,
        facade: RpcFacade,
        endpoint: Endpoint,
        *,
        trust_network: bool = False,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        super().__init__(facade, endpoint, protocol="http", trust_network=trust_network)
        self.max_body_bytes = max_frame_bytes
        app = Starlette(
            routes=[
                Route("/call", self._call, methods=["POST"]),
                Route("/healthz", self._healthz, methods=["GET"]),
            ]
        )
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            # Long keep-alive: a pooled client connection closed by the server between two
            # calls is a race the client can lose; 20 Hz control loops never idle this long.
            timeout_keep_alive=600,
            timeout_graceful_shutdown=5,
        )
        self._uvicorn = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    # -- handlers --------------------------------------------------------------------------
    async def _healthz(self, request: Request) -> Response:
        return Response(codec.dumps(self.facade.dispatch("healthz")), media_type=_JSON)

    async def _call(self, request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            return Response(self._too_large(declared), status_code=413, media_type=_JSON)
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in request.stream():
                chunks.append(chunk)
                size += len(chunk)
                if size > self.max_body_bytes:
                    return Response(self._too_large(str(size)), status_code=413, media_type=_JSON)
        except ClientDisconnect:
            return Response(status_code=400)  # nobody is left to read it; the call never ran
        self._call_started()
        try:
            # Joined in the worker thread: one copy, off the event loop.
            status, payload = await run_in_threadpool(self._handle, chunks)
        finally:
            self._call_finished()
        return Response(payload, status_code=status, media_type=_JSON)

    def _too_large(self, size: str) -> bytes:
        return _error_body(
            "RpcProtocolError", f"request body of {size} bytes exceeds the limit of {self.max_body_bytes}"
        )

    def _handle(self, chunks: list[bytes]) -> tuple[int, bytes]:
        try:
            request = codec.loads(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        except codec.CodecError as exc:
            return 400, _error_body("RpcProtocolError", f"malformed request: {exc}")
        if not isinstance(request, dict) or not isinstance(request.get("method"), str):
            return 400, _error_body("RpcProtocolError", 'request must be a JSON object with a "method" string')
        method: str = request["method"]
        args: Any = request.get("args", [])
        kwargs: Any = request.get("kwargs", {})
        try:
            result = self.facade.dispatch(method, args, kwargs)
        except MethodNotFound as exc:
            return 404, _error_body("RpcMethodNotFound", str(exc.args[0]))
        except Exception as exc:
            failure = RemoteFailure.from_exception(exc)
            return 500, _error_body(failure.type, failure.message, failure.traceback)
        try:
            return 200, codec.dumps({"ok": True, "result": result})
        except codec.CodecError as exc:
            return 500, _error_body("CodecError", f"reply of {method!r} could not be encoded: {exc}")

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
