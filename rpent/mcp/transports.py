"""Serving an MCP server over stdio or streamable HTTP (uvicorn), loopback by default."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from rpent.loopback import check_bind, listen

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
MCP_PATH = "/mcp"


def check_host(host: str, *, allow_remote: bool) -> None:
    """Refuse a non-loopback bind address unless remote access was asked for explicitly (ValueError)."""
    check_bind(
        host, opted_in=allow_remote, opt_in="--allow-remote", exposure="the MCP server has no authentication and drives a robot",
        hint="only on a network you control", error=ValueError,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client over this process's stdin/stdout until stdin closes.

    While serving, the SDK points fd 1 at stderr, so stray prints cannot corrupt the wire.
    """
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket; port 0 picks a free port (read it back with getsockname)."""
    sock = listen(host, port)
    sock.set_inheritable(True)
    return sock


def _uvicorn_server(
    server: Server[Any], host: str, on_started: Callable[[], Any], on_signal: Callable[[], Any] | None
) -> Any:
    import uvicorn

    class _Uvicorn(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                on_started()

        def handle_exit(self, sig: int, frame: Any) -> None:
            # A graceful HTTP shutdown waits for open streams; a moving robot must stop at once.
            if on_signal is not None and not self.should_exit:
                on_signal()
            super().handle_exit(sig, frame)

    # The SDK turns on DNS-rebinding protection (Host/Origin checks) for loopback hosts.
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=5,
        log_config=None,  # keep our logging set-up (stderr only)
    )
    return _Uvicorn(config)


async def serve_http(
    server: Server[Any],
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    on_listening: Callable[[str], Any] | None = None,
    on_signal: Callable[[], Any] | None = None,
    sock: socket.socket | None = None,
    _started: Callable[[Any], Any] | None = None,
) -> None:
    """Serve streamable HTTP at http://host:port/mcp until interrupted (SIGINT/SIGTERM in the main thread).

    `on_listening(url)` is called with the bound URL (useful with port 0); `on_signal()` right
    when SIGINT/SIGTERM arrives, before the graceful shutdown (uvicorn re-raises the signal
    after it, with the handler that was installed before serving). Pass `sock` (from
    `bind_socket`) to bind before doing anything else, e.g. before starting a robot.
    """
    sock = sock if sock is not None else bind_socket(host, port)
    url = f"http://{_url_host(host)}:{sock.getsockname()[1]}{MCP_PATH}"

    def announce() -> None:
        log.info("MCP server listening on %s", url)
        if on_listening is not None:
            on_listening(url)

    uv = _uvicorn_server(server, host, announce, on_signal)
    if _started is not None:
        _started(uv)
    try:
        await uv.serve(sockets=[sock])
    finally:
        sock.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class McpHttpServer:
    """Streamable HTTP in a background thread (its own event loop), for in-process use and tests.

    ```
    with McpHttpServer(build_mcp_server(toolkit)) as http:
        ... connect an MCP client to http.url ...
    ```
    """

    def __init__(self, server: Server[Any], *, host: str = DEFAULT_HOST, port: int = 0, allow_remote: bool = False) -> None:
        check_host(host, allow_remote=allow_remote)
        self.server = server
        self.host = host
        self.port = port
        self.url: str | None = None
        self._uv: Any = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self, timeout_s: float = 15.0) -> McpHttpServer:
        def on_listening(url: str) -> None:
            self.url = url
            self.port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
            self._ready.set()

        def target() -> None:
            try:
                asyncio.run(serve_http(self.server, host=self.host, port=self.port, on_listening=on_listening,
                                       _started=lambda uv: setattr(self, "_uv", uv)))
            except BaseException as exc:
                self._error = exc
                log.exception("MCP HTTP server stopped with an error")
            finally:
                self._ready.set()

        self._thread = threading.Thread(target=target, name="rpent-mcp-http", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            self.stop()
            raise TimeoutError(f"MCP HTTP server did not start within {timeout_s} s")
        if self.url is None:
            raise RuntimeError(f"MCP HTTP server failed to start: {self._error!r}")
        return self

    def stop(self, timeout_s: float = 15.0) -> None:
        """Stop serving; in-flight tool calls are cancelled and waited for by the SDK's shutdown."""
        if self._uv is not None:
            self._uv.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.error("MCP HTTP server thread still running %.0f s after stop", timeout_s)
            self._thread = None

    def __enter__(self) -> McpHttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to fd 1 (Python prints and C libraries alike) to stderr for a while.

    Used around robot start-up in stdio mode, before the SDK takes over the stream: stdout is
    the MCP wire there, and one stray line from a driver would break the client.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
