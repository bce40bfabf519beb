"""`rpent run --robot NAME --dashboard [--port P] [--host H]`: serve the operator dashboard for a session.

Wired into `rpent run` by `rpent.dashboard.options.add_dashboard_args` (flags) and `serve_dashboard`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType, ModuleType

import uvicorn

from rpent.dashboard.app import create_app
from rpent.dashboard.options import DEFAULT_PORT, TOKEN_ENV, add_dashboard_args
from rpent.dashboard.session import DashboardSession
from rpent.loopback import check_bind, is_loopback
from rpent.robot import ConfigError, RobotSpec
from rpent.runner.run import EXIT_FAILED, EXIT_OK, Terminated, describe_interruption, exit_code_for
from rpent.runtime.arm import RuntimeFault

log = logging.getLogger("rpent.dashboard")

__all__ = ["DashboardServer", "add_dashboard_args", "serve_dashboard", "serve_session"]


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, closing: threading.Event, on_closing: Callable[[], None],
                 on_signal: Callable[[int], None] | None) -> None:
        super().__init__(config)
        self.closing = closing
        self.on_closing = on_closing
        self.on_signal = on_signal
        self.ready = threading.Event()
        self.stopped_by: int | None = None  # the first signal that ended serving

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # Ctrl-C / SIGTERM end the session; unlike plain uvicorn, do not re-raise the signal after
        # the server stops, so the session can still abort the task and write its record. A repeat
        # (a launch sends SIGINT twice, then SIGTERM) changes nothing: the session is already ending,
        # and the page must still be told how it ended.
        if self.stopped_by is None:
            self.stopped_by = sig
        self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.stopped_by is not None and self.on_signal is not None:
            # Still serving while the session ends: the page sees its task end and the session stop
            # (and why), instead of a task left "running" behind a dead connection.
            await asyncio.get_running_loop().run_in_executor(None, self.on_signal, self.stopped_by)
        # Event streams never end by themselves: end them (after what they have not sent yet) so
        # the graceful shutdown is quick.
        self.closing.set()
        self.on_closing()
        await super().shutdown(sockets)


class DashboardServer:
    """One session served over HTTP. `run()` blocks (CLI); `start()`/`stop()` run it in a thread (tests)."""

    def __init__(self, session: DashboardSession, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 token: str | None = None, on_signal: Callable[[int], None] | None = None) -> None:
        """`on_signal(signum)` runs (in a worker thread, still serving) when Ctrl-C/SIGTERM ends serving."""
        check_bind(
            host, opted_in=bool(token), opt_in="an access token", exposure="anyone who reaches it could operate the robot",
            hint=f"--dashboard-token or ${TOKEN_ENV}; `rpent run --dashboard` makes one up when neither is set",
            error=ConfigError,
        )
        if not 0 <= port <= 65535:
            raise ConfigError(f"--port: must be 0..65535, got {port}")
        self.session = session
        self.host = host
        self.token = token
        self.closing = threading.Event()
        self._sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._sock.bind((host, port))
            # Listen now: the CLI prints the URL before uvicorn's loop starts, and a client that
            # connects at once must wait in the backlog instead of being refused.
            self._sock.listen()
        except OSError as exc:
            self._sock.close()
            raise ConfigError(f"--port: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(create_app(session, token=token, closing=self.closing, host=host), log_level="warning",
                                access_log=False, lifespan="off", timeout_graceful_shutdown=3)
        self._server = _Server(config, self.closing, session.bus.poke, on_signal)
        self._thread: threading.Thread | None = None

    @property
    def stopped_by(self) -> int | None:
        """The signal that ended serving (SIGINT or SIGTERM), None if it was not a signal."""
        return self._server.stopped_by

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/" + (f"?token={self.token}" if self.token else "")

    def run(self) -> None:
        self._server.run(sockets=[self._sock])

    def start(self, timeout_s: float = 10.0) -> DashboardServer:
        self._thread = threading.Thread(target=self.run, name="rpent-dashboard", daemon=True)
        self._thread.start()
        if not self._server.ready.wait(timeout_s):
            raise RuntimeError("the dashboard server did not start")
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self.closing.set()
        self.session.bus.poke()
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)


def serve_dashboard(args: argparse.Namespace, spec: RobotSpec, robot_module: ModuleType) -> int:
    """Start the shared runtime, serve the dashboard until Ctrl-C, then stop everything. Exit code."""
    session = DashboardSession(args=args, spec=spec, robot=robot_module, output_root=Path(args.output_dir))
    return serve_session(args, session)


def serve_session(args: argparse.Namespace, session: DashboardSession,
                  on_stopping: Callable[[], None] | None = None) -> int:
    """Serve `session` on the address the dashboard flags give until Ctrl-C/SIGTERM; always stop it.

    `on_stopping` runs (in this thread) once serving ended, before the session aborts its task and
    writes the record, e.g. to ignore a second Ctrl-C meanwhile.
    """
    host = getattr(args, "dashboard_host", None) or "127.0.0.1"
    token = getattr(args, "dashboard_token", None) or os.environ.get(TOKEN_ENV)
    if not is_loopback(host) and not token:
        token = secrets.token_urlsafe(18)
    server = DashboardServer(session, host=host, port=getattr(args, "dashboard_port", DEFAULT_PORT), token=token,
                             on_signal=lambda sig: _end_session(session, _interruption(sig)))
    code = EXIT_OK
    early: KeyboardInterrupt | None = None  # a signal before uvicorn took over Ctrl-C / SIGTERM
    # Ctrl-C is KeyboardInterrupt until uvicorn takes SIGINT over, also when the session was started with
    # SIGINT ignored (a script's `cmd &`): the documented exit 130 does not depend on how it was started.
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
                signal.SIGTERM: signal.signal(signal.SIGTERM, _raise_terminated)} if _main_thread() else {}
    try:
        log.info("starting shared runtime components ...")
        session.start()
        log.info("dashboard for robot %s at %s (records under %s)", session.spec.name, server.url, session.output_root)
        print(f"rpent dashboard: {server.url}", flush=True)
        server.run()  # uvicorn handles Ctrl-C / SIGTERM and returns
    except ConfigError:
        raise
    except KeyboardInterrupt as exc:
        early = exc
    except RuntimeFault as exc:
        # The runtime's own description of an expected failure (e.g. an arm that does not answer):
        # one line; a traceback would add nothing but noise, and no task record exists yet for it.
        log.error("the dashboard could not start the robot: %s", exc)
        code = EXIT_FAILED
    except Exception:
        log.exception("the dashboard session failed")
        code = EXIT_FAILED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.closing.set()
        if on_stopping is not None:
            on_stopping()
        interruption = early or _interruption(server.stopped_by)
        if interruption is not None:
            code = exit_code_for(interruption)
            if not session.stopped:  # a signal before serving began; else the server already ended it
                _end_session(session, interruption)
        session.stop()
    return code


def _end_session(session: DashboardSession, interruption: KeyboardInterrupt | None) -> None:
    if interruption is None:
        return
    reason = describe_interruption(interruption)
    log.warning("%s: ending the session (a running task is cancelled and its record written)", reason)
    session.stop(reason=reason)  # a running task's record names the signal


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _interruption(sig: int | None) -> KeyboardInterrupt | None:
    if sig is None:
        return None
    return Terminated() if sig == signal.SIGTERM else KeyboardInterrupt()
