"""Run an RPC server as a supervised child process (what a robot's ``init_runtime`` uses).

``ServerProcess("robots.libero.env_server", "socket://127.0.0.1:0").start()`` runs
``python -m robots.libero.env_server --endpoint socket://127.0.0.1:0``, learns the bound port
from the child's ``RPENT_RPC_LISTENING`` line, confirms readiness with ``healthz`` and returns
the endpoint. ``stop()`` asks for ``shutdown``, then terminates, then kills. If the child dies
before it is ready, the error carries the tail of its stderr.
"""

from __future__ import annotations

import atexit
import collections
import os
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import IO

from rpent.rpc.errors import EndpointError, RpcError
from rpent.rpc.transport.client import RpcClient
from rpent.rpc.transport.endpoint import Endpoint, as_endpoint, parse_endpoint
from rpent.rpc.transport.server import READY_PREFIX

_STDERR_LINES = 200
_live: weakref.WeakSet[ServerProcess] = weakref.WeakSet()


class ServerStartError(RuntimeError):
    """The server process exited or stayed silent before it was ready."""

    def __init__(self, message: str, stderr_tail: str) -> None:
        self.stderr_tail = stderr_tail
        tail = f"\n--- last lines of its stderr ---\n{stderr_tail}" if stderr_tail else " (no stderr output)"
        super().__init__(message + tail)


class ServerProcess:
    """A child ``python -m <module> --endpoint <endpoint> [args...]`` serving one facade.

    ``module`` may also be a path to a ``.py`` script (run as ``python <path> --endpoint ...``).
    """

    def __init__(
        self,
        module: str,
        endpoint: str | Endpoint = "http://127.0.0.1:0",
        *,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        python: str = sys.executable,
        ready_timeout_s: float = 60.0,
        echo_stderr: bool = False,
    ) -> None:
        self.module = module
        self.requested_endpoint = as_endpoint(endpoint)
        self.args = list(args)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.python = python
        self.ready_timeout_s = ready_timeout_s
        self.echo_stderr = echo_stderr
        self.endpoint: Endpoint | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._cond = threading.Condition()
        self._announced: Endpoint | None = None
        self._stdout_closed = False
        self._readers: list[threading.Thread] = []

    @property
    def command(self) -> list[str]:
        # A path to a .py file runs as a script (benchmarks); anything else is a module name.
        target = [self.module] if self.module.endswith(".py") else ["-m", self.module]
        return [self.python, *target, "--endpoint", str(self.requested_endpoint), *self.args]

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll() if self._proc is not None else None

    def stderr_tail(self, lines: int = 40) -> str:
        with self._cond:
            return "".join(list(self._stderr)[-lines:]).rstrip()

    # -- start -----------------------------------------------------------------------------
    def start(self) -> Endpoint:
        """Start the child and return its endpoint once ``healthz`` answers."""
        if self._proc is not None:
            raise RuntimeError(f"{self.module} server was already started")
        env = {**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1"}
        self._proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=self.cwd,
        )
        _live.add(self)
        assert self._proc.stdout is not None and self._proc.stderr is not None
        self._readers = [
            threading.Thread(target=self._read_stdout, args=(self._proc.stdout,), daemon=True),
            threading.Thread(target=self._read_stderr, args=(self._proc.stderr,), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        try:
            self.endpoint = self._wait_ready(time.monotonic() + self.ready_timeout_s)
        except BaseException:
            self._kill()
            raise
        return self.endpoint

    def _read_stdout(self, stream: IO[str]) -> None:
        for line in stream:
            if line.startswith(READY_PREFIX):
                try:
                    announced = parse_endpoint(line[len(READY_PREFIX) :].strip())
                except EndpointError:
                    continue
                with self._cond:
                    self._announced = announced
                    self._cond.notify_all()
        with self._cond:
            self._stdout_closed = True
            self._cond.notify_all()

    def _read_stderr(self, stream: IO[str]) -> None:
        for line in stream:
            if self.echo_stderr:
                sys.stderr.write(f"[{self.module}] {line}")
            with self._cond:
                self._stderr.append(line)

    def _wait_ready(self, deadline: float) -> Endpoint:
        assert self._proc is not None
        with self._cond:
            # stdout closing means the child is exiting; no need to poll the process.
            self._cond.wait_for(
                lambda: self._announced is not None or self._stdout_closed, timeout=max(deadline - time.monotonic(), 0)
            )
            announced = self._announced
        if announced is None:
            if self._stdout_closed:
                code = self._proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
                self._join_readers(1.0)
                raise ServerStartError(
                    f"server {self.module} exited with code {code} before it was ready", self.stderr_tail()
                )
            raise ServerStartError(
                f"server {self.module} did not report readiness within {self.ready_timeout_s:g} s", self.stderr_tail()
            )
        last_error: Exception | None = None
        with RpcClient(announced, timeout_s=5.0, connect_timeout_s=2.0) as client:
            while time.monotonic() < deadline:
                try:
                    health = client.healthz(timeout_s=max(min(5.0, deadline - time.monotonic()), 0.05))
                except RpcError as exc:
                    last_error = exc
                    try:
                        self._proc.wait(timeout=0.05)  # pause between probes; ends early if the child dies
                        break
                    except subprocess.TimeoutExpired:
                        continue
                if health.get("pid") not in (None, self._proc.pid):
                    raise ServerStartError(
                        f"{announced} answered healthz from pid {health.get('pid')}, not our child {self._proc.pid}",
                        self.stderr_tail(),
                    )
                return announced
        raise ServerStartError(f"server {self.module} at {announced} failed healthz ({last_error})", self.stderr_tail())

    # -- stop ------------------------------------------------------------------------------
    def stop(self, timeout_s: float = 10.0) -> int | None:
        """Stop the child: rpc ``shutdown``, then SIGTERM, then SIGKILL. Returns its exit code."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None and self.endpoint is not None:
            try:
                with RpcClient(self.endpoint, timeout_s=min(timeout_s, 5.0), connect_timeout_s=1.0) as client:
                    client.shutdown()
            except RpcError:
                pass  # already dying or wedged: fall through to signals
        for escalate in (None, proc.terminate, proc.kill):
            if escalate is not None and proc.poll() is None:
                escalate()
            try:
                proc.wait(timeout=timeout_s / 3)
                break
            except subprocess.TimeoutExpired:
                continue
        self._join_readers(2.0)
        _live.discard(self)
        return proc.returncode

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._join_readers(2.0)
        _live.discard(self)

    def _join_readers(self, timeout_s: float) -> None:
        for reader in self._readers:
            reader.join(timeout_s)

    def client(self, **kwargs: float) -> RpcClient:
        if self.endpoint is None:
            raise RuntimeError(f"{self.module} server is not running")
        return RpcClient(self.endpoint, **kwargs)  # type: ignore[arg-type]

    def __enter__(self) -> ServerProcess:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@atexit.register
def _stop_leftovers() -> None:
    # A parent that exits without stop() must not leave a simulator running.
    for server in list(_live):
        try:
            server.stop(timeout_s=3.0)
        except Exception:
            pass
