"""What both transports' servers share: lifecycle, in-flight tracking, limits, counters, the bind rule."""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod

from rpent.loopback import check_bind, listen
from rpent.rpc.facade import RpcFacade
from rpent.rpc.transport.endpoint import Endpoint
from rpent.rpc.transport.limits import ServerCounters, ServerLimits

log = logging.getLogger(__name__)


class UntrustedBindError(ValueError):
    """An RPC server was asked to listen on a non-loopback address without its opt-in
    (``trust_network`` for the pickle socket transport, ``allow_remote`` for http)."""


# What anyone who reaches the port could do, and the opt-in that accepts it, per transport.
_EXPOSURE = {
    "socket": (
        "the socket transport unpickles what it receives, so any peer could run code in this process",
        "--trust-network (trust_network=True)",
        "only on a network where every peer is trusted",
    ),
    "http": (
        "the HTTP transport has no authentication, so any peer could call this server's methods",
        "--allow-remote (allow_remote=True)",
        "only on a network you control",
    ),
}


def check_bind_allowed(endpoint: Endpoint, *, opted_in: bool) -> None:
    exposure, opt_in, hint = _EXPOSURE[endpoint.protocol]
    check_bind(
        endpoint.host,
        opted_in=opted_in,
        opt_in=opt_in,
        exposure=exposure,
        hint=hint,
        field="--endpoint",
        error=UntrustedBindError,
    )


class RpcServer(ABC):
    """A running (or startable) server for one facade. ``endpoint`` carries the bound port."""

    endpoint: Endpoint

    def __init__(
        self,
        facade: RpcFacade,
        endpoint: Endpoint,
        *,
        protocol: str,
        opted_in: bool,
        limits: ServerLimits | None,
    ) -> None:
        """Check the endpoint and bind its port now, so the port listens before `start()`."""
        if endpoint.protocol != protocol:
            raise ValueError(f"{type(self).__name__} needs a {protocol}:// endpoint, got {endpoint}")
        check_bind_allowed(endpoint, opted_in=opted_in)
        self.limits = limits if limits is not None else ServerLimits()
        self._counters = ServerCounters()
        self._listener = listen(endpoint.host, endpoint.port)
        self.endpoint = endpoint.with_port(self._listener.getsockname()[1])
        self.facade = facade
        self._stopped = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopping = False
        self._inflight = 0
        self._idle = threading.Condition()
        self._watcher: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> RpcServer:
        """Serve in background threads and return at once (the port is already listening)."""
        self._start_serving()
        self._watcher = threading.Thread(target=self._watch_shutdown, name=f"rpc-watch {self.endpoint}", daemon=True)
        self._watcher.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting calls, let in-flight replies go out (up to ``timeout_s``), release the facade."""
        with self._stop_lock:
            if self._stopping:
                self._stopped.wait(timeout_s)
                return
            self._stopping = True
        try:
            self._stop_serving(timeout_s)
        finally:
            try:
                self._close_facade(timeout_s)
            finally:
                self._stopped.set()
                self.facade.shutdown_requested.set()  # releases the watcher

    def _close_facade(self, timeout_s: float) -> None:
        # Closing a simulator under a handler that is still stepping it can crash the process;
        # a handler that outlived the stop keeps its resources instead.
        lock = self.facade.lock
        if not lock.acquire(timeout=timeout_s):
            log.warning(
                "rpc server %s: a call is still running after %.1f s; facade not closed", self.endpoint, timeout_s
            )
            return
        try:
            self.facade.close()
        finally:
            lock.release()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the server has stopped (e.g. after an rpc ``shutdown``); True if it has."""
        return self._stopped.wait(timeout_s)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def counters(self) -> dict[str, int]:
        """Refused, dropped and rejected so far (see ServerCounters), plus the connections open now."""
        return {**self._counters.snapshot(), "open_connections": self._open_connections()}

    def __enter__(self) -> RpcServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _watch_shutdown(self) -> None:
        self.facade.shutdown_requested.wait()
        if not self._stopping:
            self.stop()

    # -- in-flight calls, so a stop never cuts a reply (the shutdown reply included) ---------
    def _call_started(self) -> None:
        with self._idle:
            self._inflight += 1

    def _call_finished(self) -> None:
        with self._idle:
            self._inflight -= 1
            self._idle.notify_all()

    def _wait_idle(self, timeout_s: float) -> bool:
        with self._idle:
            return self._idle.wait_for(lambda: self._inflight == 0, timeout_s)

    # -- transport specifics ---------------------------------------------------------------
    @abstractmethod
    def _start_serving(self) -> None: ...

    @abstractmethod
    def _stop_serving(self, timeout_s: float) -> None: ...

    @abstractmethod
    def _open_connections(self) -> int: ...
