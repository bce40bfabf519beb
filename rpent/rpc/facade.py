"""RpcFacade: the server-side object whose routes an RPC server exposes.

A facade owns a route table (method name -> callable) and one lock. By default every
route runs under the lock, so a simulator or a model is never entered by two calls at
once, whichever transport or connection they arrive on. ``healthz`` and ``shutdown`` are
built in, answer without the lock (a readiness probe must not wait behind a long step),
and are never implemented by subclasses.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BUILTIN_ROUTES = ("healthz", "shutdown")


class MethodNotFound(LookupError):
    """No route with that name; travels to the client as RpcMethodNotFound."""


@dataclass(frozen=True)
class Route:
    fn: Callable[..., Any]
    locked: bool


@dataclass(frozen=True)
class RemoteFailure:
    """What a handler exception becomes on the wire: type name, message, traceback text."""

    type: str
    message: str
    traceback: str = ""

    @classmethod
    def from_exception(cls, exc: BaseException) -> RemoteFailure:
        kind = "RpcMethodNotFound" if isinstance(exc, MethodNotFound) else type(exc).__name__
        message = str(exc.args[0]) if isinstance(exc, MethodNotFound) and exc.args else str(exc)
        return cls(kind, message, "".join(traceback.format_exception(exc)))

    def to_dict(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message, "traceback": self.traceback}


class RpcFacade:
    """Routes calls to registered handlers under one lock.

    Subclasses register their routes in ``__init__`` with ``_register_rpc``; ``close`` is
    called once when the server stops, to release the simulator or model.
    """

    def __init__(self, *, lock: threading.Lock | threading.RLock | None = None) -> None:
        self._lock = lock if lock is not None else threading.Lock()
        self._routes: dict[str, Route] = {}
        self._shutdown = threading.Event()
        self._routes["healthz"] = Route(self._healthz, locked=False)
        self._routes["shutdown"] = Route(self._request_shutdown, locked=False)

    # -- routing ---------------------------------------------------------------------------
    def _register_rpc(self, name: str, fn: Callable[..., Any], *, locked: bool = True) -> None:
        """Expose ``fn`` as the method ``name``. ``locked=False`` only for handlers safe to run
        concurrently with everything else (pure reads of immutable data)."""
        if not name or not name.isidentifier():
            raise ValueError(f"rpc method name {name!r} must be a Python identifier")
        if name in BUILTIN_ROUTES:
            raise ValueError(f"rpc method {name!r} is built in and cannot be registered")
        if name in self._routes:
            raise ValueError(f"rpc method {name!r} is already registered")
        self._routes[name] = Route(fn, locked)

    @property
    def lock(self) -> threading.Lock | threading.RLock:
        """The lock locked routes run under; hold it to touch the facade's resources safely."""
        return self._lock

    @property
    def methods(self) -> list[str]:
        return sorted(self._routes)

    def dispatch(self, method: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> Any:
        """Run one call. Raises MethodNotFound, TypeError for bad call shapes, or what the handler raises."""
        if not isinstance(method, str):
            raise TypeError(f"method must be a str, got {type(method).__name__}")
        route = self._routes.get(method)
        if route is None:
            raise MethodNotFound(f"no rpc method {method!r} (available: {', '.join(self.methods)})")
        if not isinstance(args, (list, tuple)):
            raise TypeError(f"args of {method!r} must be a list, got {type(args).__name__}")
        kwargs = {} if kwargs is None else kwargs
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise TypeError(f"kwargs of {method!r} must be a mapping with str keys")
        if not route.locked:
            return route.fn(*args, **kwargs)
        with self._lock:
            return route.fn(*args, **kwargs)

    # -- built-ins -------------------------------------------------------------------------
    def _healthz(self) -> dict[str, Any]:
        return {
            "ok": True,
            "facade": type(self).__qualname__,
            "pid": os.getpid(),
            "methods": self.methods,
            "shutting_down": self._shutdown.is_set(),
        }

    def _request_shutdown(self) -> dict[str, bool]:
        self._shutdown.set()
        return {"ok": True}

    @property
    def shutdown_requested(self) -> threading.Event:
        """Set by the ``shutdown`` route; servers watch it and stop after replying."""
        return self._shutdown

    def close(self) -> None:
        """Release resources (simulator, model). Called once by the server after it stops."""
