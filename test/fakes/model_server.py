"""A scripted stand-in for the model services, served on 127.0.0.1 from a background thread.

It speaks the Anthropic Messages API (JSON and SSE) and the OpenAI Responses API (SSE) closely
enough for the official clients (anthropic SDK, Claude Code CLI, Codex CLI). Each model request
consumes the next scripted turn; every request is recorded for assertions. A streamed reply can be
cut (``Reply(cut=Cut(...))``): the connection dropped mid-body, or the body ended early.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from . import anthropic_wire, responses_wire
from .script import Answer, Cut, Failure, RecordedRequest, Reply, Turn


class ScriptError(AssertionError):
    """The client sent something the script did not expect (or more requests than scripted)."""


class _DroppedConnection(Exception):
    """Raised inside a streamed body: uvicorn then closes the socket without ending the body."""


class _QuietDrops(logging.Filter):
    """Keeps uvicorn from logging a scripted connection drop as a crash of the application."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], _DroppedConnection))


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


class FakeModelServer:
    """Use as a context manager; ``base_url`` is ``http://127.0.0.1:<ephemeral port>``.

    ``when_exhausted``: the answer once the script runs out; None means a 400 error and a
    recorded ScriptError (raised again by ``raise_errors``).
    """

    def __init__(self, turns: Iterable[Turn] = (), *, when_exhausted: Turn | None = None) -> None:
        self._turns: deque[Turn] = deque(turns)
        self._lock = threading.Lock()
        self.when_exhausted = when_exhausted
        self.requests: list[RecordedRequest] = []
        self.errors: list[BaseException] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- script -----------------------------------------------------------------------------
    def script(self, *turns: Turn) -> None:
        """Append turns to the script."""
        with self._lock:
            self._turns.extend(turns)

    def reset(self) -> None:
        """Forget script, recordings and errors (one server can then serve many tests)."""
        with self._lock:
            self._turns.clear()
            self.requests = []
            self.errors = []
            self.when_exhausted = None

    @property
    def remaining_turns(self) -> int:
        with self._lock:
            return len(self._turns)

    @property
    def model_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.is_model_call]

    def raise_errors(self) -> None:
        with self._lock:
            errors = list(self.errors)
        if errors:
            raise errors[0]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- lifecycle --------------------------------------------------------------------------
    def start(self, timeout_s: float = 10.0) -> FakeModelServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app(), log_level="warning", access_log=False, lifespan="off",
            timeout_graceful_shutdown=2, timeout_keep_alive=30,
        )
        uvicorn_log = logging.getLogger("uvicorn.error")  # set up by Config, so added after it
        if not any(isinstance(f, _QuietDrops) for f in uvicorn_log.filters):
            uvicorn_log.addFilter(_QuietDrops())
        self._server = _Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="fake-model-server", daemon=True
        )
        self._thread.start()
        if not self._server.ready.wait(timeout_s):
            raise RuntimeError("fake model server did not start")
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(timeout_s)
        self._server = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP -------------------------------------------------------------------------------
    def _app(self) -> Starlette:
        return Starlette(routes=[
            Route("/", self._root, methods=["GET", "HEAD"]),
            Route("/v1/messages", self._messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            Route("/v1/responses", self._responses, methods=["POST"]),
            # A gateway that serves the Messages API under a path of its own (beambot's: <endpoint>/anthropic).
            Route("/{gateway}/v1/messages", self._messages, methods=["POST"]),
            Route("/{path:path}", self._unknown, methods=["GET", "POST", "HEAD", "PUT", "DELETE"]),
        ])

    async def _record(self, request: Request) -> RecordedRequest:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        recorded = RecordedRequest(
            method=request.method, path=request.url.path, query=request.url.query,
            headers={k.lower(): v for k, v in request.headers.items()}, body=body,
            received_at=time.perf_counter(),
        )
        with self._lock:
            self.requests.append(recorded)
        return recorded

    async def _root(self, request: Request) -> Response:
        await self._record(request)
        return Response(b"", status_code=200)

    async def _unknown(self, request: Request) -> Response:
        recorded = await self._record(request)
        recorded.finished_at = time.perf_counter()
        return JSONResponse({"type": "error", "error": {"type": "not_found_error",
                                                        "message": f"no route {request.url.path}"}},
                            status_code=404)

    async def _count_tokens(self, request: Request) -> Response:
        recorded = await self._record(request)
        recorded.finished_at = time.perf_counter()
        return JSONResponse({"input_tokens": anthropic_wire.estimate_tokens(recorded.body or {})})

    async def _answer(self, body: Any) -> Answer:
        with self._lock:
            turn = self._turns.popleft() if self._turns else self.when_exhausted
        if turn is None:
            error = ScriptError(f"model request beyond the script: {json.dumps(body)[:500]}")
            with self._lock:
                self.errors.append(error)
            return Failure(status=400, message=str(error), retry_after_s=None)
        try:
            # Run in a worker thread: a turn may block (hold events, test assertions on slow data).
            answer = await asyncio.to_thread(turn, body) if callable(turn) else turn
            if isinstance(answer, Reply) and answer.hold is not None:
                held = await asyncio.to_thread(answer.hold.wait, answer.hold_timeout_s)
                if not held:
                    raise ScriptError("scripted hold was never released")
        except Exception as error:  # an assertion inside a turn fails the test later
            with self._lock:
                self.errors.append(error)
            return Failure(status=400, message=f"script raised {error!r}", retry_after_s=None)
        return answer

    async def _messages(self, request: Request) -> Response:
        recorded = await self._record(request)
        body = recorded.body if isinstance(recorded.body, dict) else {}
        answer = await self._answer(body)
        streaming = bool(body.get("stream"))
        if isinstance(answer, Failure) and not (answer.mid_stream and streaming):
            recorded.finished_at = time.perf_counter()
            return self._failure_response(answer, anthropic_wire.error_json(answer))
        if isinstance(answer, Failure):
            events = anthropic_wire.failing_events(body, answer)
        elif streaming:
            events = anthropic_wire.message_events(body, answer)
        else:
            recorded.finished_at = time.perf_counter()
            return JSONResponse(anthropic_wire.message_json(body, answer),
                                headers={"request-id": f"req_{len(self.requests)}"})
        return self._stream(events, recorded, answer.cut if isinstance(answer, Reply) else None)

    async def _responses(self, request: Request) -> Response:
        recorded = await self._record(request)
        body = recorded.body if isinstance(recorded.body, dict) else {}
        answer = await self._answer(body)
        if isinstance(answer, Failure) and not answer.mid_stream:
            recorded.finished_at = time.perf_counter()
            return self._failure_response(answer, responses_wire.error_json(answer))
        if isinstance(answer, Failure):
            events = responses_wire.failing_events(body, answer)
        else:
            events = responses_wire.response_events(body, answer)
        return self._stream(events, recorded, answer.cut if isinstance(answer, Reply) else None)

    @staticmethod
    def _failure_response(failure: Failure, payload: dict[str, Any]) -> Response:
        headers = {}
        if failure.retry_after_s is not None:
            headers["retry-after-ms"] = str(int(failure.retry_after_s * 1000))
            headers["retry-after"] = str(math.ceil(failure.retry_after_s))
        return JSONResponse(payload, status_code=failure.status, headers=headers)

    def _stream(self, events: Iterator[bytes], recorded: RecordedRequest, cut: Cut | None) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            try:
                for event in events if cut is None else self._until_cut(events, cut):
                    yield event
            finally:
                recorded.finished_at = time.perf_counter()

        return StreamingResponse(body(), media_type="text/event-stream",
                                 headers={"cache-control": "no-cache"})

    def _until_cut(self, events: Iterator[bytes], cut: Cut) -> Iterator[bytes]:
        seen = 0
        for event in events:
            yield event
            if cut.after in _event_kinds(event):
                seen += 1
                if seen == cut.nth:
                    if cut.drop_connection:
                        raise _DroppedConnection()
                    return
        # A cut that never happens would let the test pass on a complete stream.
        with self._lock:
            self.errors.append(ScriptError(f"scripted cut never reached: {cut}"))


def _event_kinds(event: bytes) -> set[str]:
    """The SSE event name and, for a delta event, the delta's type."""
    fields = dict(line.split(": ", 1) for line in event.decode().strip().splitlines())
    kinds = {fields.get("event", "")}
    delta = json.loads(fields.get("data", "{}")).get("delta")
    if isinstance(delta, dict):
        kinds.add(delta.get("type", ""))
    return kinds
