"""The dashboard's web app (Starlette): a static page, a JSON API, an event stream and live frames.

    GET  /                         the page (static HTML + JS, no build step)
    GET  /api/spec                 the robot's Dashboard spec (task form, components, frame channels) and the
                                   planners, recipes and scene reset this session offers
    GET  /api/state                a snapshot of the session, with `last_event_id`
    GET  /api/events               server-sent events; resumes after `Last-Event-ID` (or ?after=N)
    POST /api/tasks                {"fields": {...}, "planner", "recipe", "reset"} -> start a task (400 bad
                                   field, 409 busy; refusals are logged)
    POST /api/task/message|note    {"text": ...} to the running task
    POST /api/task/abort           cancel the active tool call, end the task as aborted
    POST /api/stop                 {"reason": ...} latch the robot's stop: every motion stops and is refused
    POST /api/stop/release         the operator releases it (409 when it did not hold)
    POST /api/requests/{id}        {"approve": bool} or {"answer": str}; 409 if the id is not pending
    GET  /frames/{channel}.jpg     the newest picture of a frame channel
    GET  /artifacts/{task}/{path}  files of a task's record (episode.mp4, steps.jsonl, images ...)
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
from collections.abc import AsyncIterator
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from rpent.dashboard.bus import sse_message
from rpent.dashboard.forms import TaskFormError, field_to_dict
from rpent.dashboard.interaction import StaleRequest
from rpent.dashboard.session import DashboardSession, SessionBusy

log = logging.getLogger("rpent.dashboard")

STATIC = Path(__file__).parent / "static"
KEEPALIVE_S = 15.0
TOKEN_COOKIE = "rpent_dashboard_token"
LOOPBACK_NAMES = ("127.0.0.1", "localhost")


def create_app(session: DashboardSession, *, token: str | None = None, closing: threading.Event | None = None,
               host: str = "127.0.0.1") -> ASGIApp:
    """The ASGI app for one session bound to `host`; with `token`, every request must carry it (see
    TokenGate), without one only loopback names and `host` itself are served (see HostGate)."""
    endpoints = _Endpoints(session, closing or threading.Event())
    app: ASGIApp = Starlette(routes=endpoints.routes(), exception_handlers={RefusedRequest: _refused})
    if token:
        return TokenGate(app, token)
    return HostGate(app, [*LOOPBACK_NAMES, host])


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RefusedRequest)
    return _error(exc.status, str(exc))


class _Endpoints:
    """The page, the JSON API, the event stream, frames and artifacts of one session."""

    def __init__(self, session: DashboardSession, closing: threading.Event) -> None:
        self.session = session
        self.closing = closing

    def routes(self) -> list[Route | Mount]:
        return [
            Route("/", self.index),
            Route("/favicon.ico", self.favicon),
            Route("/api/spec", self.spec),
            Route("/api/state", self.state),
            Route("/api/events", self.events),
            Route("/api/tasks", self.start_task, methods=["POST"]),
            Route("/api/task/message", self.message, methods=["POST"]),
            Route("/api/task/note", self.note, methods=["POST"]),
            Route("/api/task/abort", self.abort, methods=["POST"]),
            Route("/api/stop", self.latch_stop, methods=["POST"]),
            Route("/api/stop/release", self.release_stop, methods=["POST"]),
            Route("/api/requests/{request_id}", self.respond, methods=["POST"]),
            Route("/frames/{channel}.jpg", self.frame),
            Route("/artifacts/{task_id}/{path:path}", self.artifact),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]

    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    async def spec(self, request: Request) -> Response:
        session = self.session
        d = session.dashboard
        return JSONResponse({
            "robot": session.spec.name,
            "planner": getattr(session.args, "planner", None),
            **session.run_options(),
            "task_command": d.task_command,
            "task_fields": [field_to_dict(f) for f in d.task_fields],
            "components": [{"name": c.name, "label": c.label, "shared": c.shared} for c in d.components],
            "frame_channels": [{"name": c.name, "label": c.label, "max_fps": c.max_fps} for c in d.frame_channels],
        })

    async def favicon(self, request: Request) -> Response:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    async def state(self, request: Request) -> Response:
        return JSONResponse(self.session.snapshot(), headers={"Cache-Control": "no-store"})

    async def events(self, request: Request) -> Response:
        cursor = _start_cursor(request)
        return StreamingResponse(_stream(self.session, cursor, self.closing), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def start_task(self, request: Request) -> Response:
        body = await _json_body(request)
        try:
            task_id = await run_in_threadpool(lambda: self.session.start_task(
                body.get("fields", {}), planner=body.get("planner"), recipe=body.get("recipe"), reset=body.get("reset")))
        except TaskFormError as exc:
            log.warning("refused to start a task: %s", exc)
            return _error(400, str(exc))
        except SessionBusy as exc:
            log.warning("refused to start a task: %s", exc)
            return _error(409, str(exc))
        return JSONResponse({"task_id": task_id}, status_code=201)

    async def message(self, request: Request) -> Response:
        return await _text_action(request, self.session.send_message)

    async def note(self, request: Request) -> Response:
        return await _text_action(request, self.session.add_note)

    async def abort(self, request: Request) -> Response:
        body = await _json_body(request)
        reason = str(body.get("reason") or "operator abort")
        if not await run_in_threadpool(self.session.abort, reason):
            return _error(409, "no task is running")
        return JSONResponse({"aborted": True})

    async def latch_stop(self, request: Request) -> Response:
        body = await _json_body(request)
        reason = str(body.get("reason") or "the operator pressed Stop")
        event = await run_in_threadpool(self.session.latch_stop, reason)
        return JSONResponse({"latched": True, "line": event["line"]})

    async def release_stop(self, request: Request) -> Response:
        if not await run_in_threadpool(self.session.release_stop):
            return _error(409, "the stop is not latched")
        return JSONResponse({"released": True})

    async def respond(self, request: Request) -> Response:
        body = await _json_body(request)
        try:
            outcome = self.session.interaction.respond(request.path_params["request_id"],
                                                  approve=body.get("approve"), answer=body.get("answer"))
        except StaleRequest as exc:
            return _error(409, str(exc))
        except ValueError as exc:
            return _error(400, str(exc))
        return JSONResponse({"outcome": outcome})

    async def frame(self, request: Request) -> Response:
        latest = self.session.frames.latest(request.path_params["channel"])
        if latest is None:
            return _error(404, f"no frame channel {request.path_params['channel']!r}")
        if not latest.jpeg:
            return _error(404, latest.error or "no frame yet")
        return Response(latest.jpeg, media_type="image/jpeg",
                        headers={"Cache-Control": "no-store", "X-Frame-Number": str(latest.n)})

    async def artifact(self, request: Request) -> Response:
        root = self.session.task_dir(request.path_params["task_id"])
        if root is None:
            return _error(404, "no such task")
        path = (root / request.path_params["path"]).resolve()
        if not path.is_relative_to(root.resolve()) or not path.is_file():
            return _error(404, "no such file in the task's record")
        return FileResponse(path)


async def _stream(session: DashboardSession, cursor: int, closing: threading.Event) -> AsyncIterator[str]:
    bus, frames = session.bus, session.frames
    waiter = bus.subscribe(asyncio.get_running_loop())
    seen: dict[str, int] = {}
    try:
        yield "retry: 1000\n\n"
        while True:
            read = bus.read(cursor)
            if read.gap:
                # This reader fell behind the ring: skip ahead and have the page reload the snapshot.
                cursor = bus.last_id
                yield f"id: {cursor}\nevent: resync\ndata: {json.dumps({'last_event_id': cursor})}\n\n"
            elif read.events:
                cursor = read.cursor
                yield "".join(sse_message(e) for e in read.events)
            changed = {name: n for name, n in frames.counters().items() if n and seen.get(name) != n}
            if changed:
                seen.update(changed)
                yield "".join(f"event: frame\ndata: {json.dumps({'channel': c, 'n': n})}\n\n" for c, n in changed.items())
            if read.events or read.gap:
                continue
            if closing.is_set():
                break  # the server is stopping and this reader has been sent every event (the session's end too)
            before = bus.last_id
            await waiter.wait(KEEPALIVE_S)
            if bus.last_id == before and not closing.is_set():
                yield ": keepalive\n\n"
    finally:
        bus.unsubscribe(waiter)


def _start_cursor(request: Request) -> int:
    raw = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
    try:
        return max(int(raw), 0)
    except ValueError:
        return 0


class RefusedRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _json_body(request: Request) -> dict[str, Any]:
    """The JSON object of an operator action, after the checks that stop other web pages sending one.

    A page from another origin can send a "simple" cross-site POST (text/plain, no preflight) to
    127.0.0.1; demanding application/json forces a CORS preflight, which this app never grants, and
    a mismatched Origin is refused outright.
    """
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.headers.get('host', '')}":
        raise RefusedRequest(403, f"origin {origin} may not control this robot")
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise RefusedRequest(415, "operator actions must be sent as application/json")
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise RefusedRequest(400, "body: must be a JSON object") from None
    if not isinstance(body, dict):
        raise RefusedRequest(400, "body: must be a JSON object")
    return body


async def _text_action(request: Request, action: Any) -> Response:
    body = await _json_body(request)
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        return _error(400, "text: must be a non-empty string")
    try:
        await run_in_threadpool(action, text.strip())
    except SessionBusy as exc:
        return _error(409, str(exc))
    return JSONResponse({"ok": True})


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


class HostGate:
    """Serves only requests whose Host names one of `allowed` (without a token).

    A web page that rebinds its own DNS name to the dashboard's address still sends its own name as
    Host, so it is refused. Each refused name is logged once, with the rule, so an operator who typed
    another name for this machine learns why the page does not open.
    """

    MAX_LOGGED = 32  # distinct refused names worth a line each; a scan of many names must not flood the log

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.allowed = list(dict.fromkeys(name.lower() for name in allowed))
        self._logged: set[str] = set()
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), "")
        if _host_name(host) in self.allowed:
            await self.app(scope, receive, send)
            return
        rule = (f"without a token this dashboard answers only to the names {', '.join(self.allowed)} "
                f"(a page that points another name at it could drive the robot); open the printed URL, "
                f"or serve with --dashboard-token to allow other names")
        with self._lock:
            first = host not in self._logged and len(self._logged) < self.MAX_LOGGED
            if first:
                self._logged.add(host)
        if first:
            log.warning("refused a request for Host %r: %s", host, rule)
        await JSONResponse({"error": f"Host {host!r} refused: {rule}"}, status_code=400)(scope, receive, send)


def _host_name(host: str) -> str:
    """The name of a Host header without its port: `127.0.0.2:8080` -> 127.0.0.2, `[::1]:80` -> ::1."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class TokenGate:
    """Requires the session token: `Authorization: Bearer <token>`, the cookie, or `?token=` (sets the cookie)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
        offered = parse_qs(scope.get("query_string", b"").decode()).get("token", [None])[0]
        from_query = offered is not None
        if offered is None and headers.get("authorization", "").startswith("Bearer "):
            offered = headers["authorization"][7:]
        if offered is None and "cookie" in headers:
            cookie = SimpleCookie(headers["cookie"]).get(TOKEN_COOKIE)
            offered = cookie.value if cookie else None
        if offered is None or not secrets.compare_digest(offered.encode(), self.token.encode()):
            await JSONResponse({"error": "token required: open the URL printed at start-up"}, status_code=401)(scope, receive, send)
            return
        if not from_query:
            await self.app(scope, receive, send)
            return

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                cookie = f"{TOKEN_COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())]}
            await send(message)

        await self.app(scope, receive, send_with_cookie)
