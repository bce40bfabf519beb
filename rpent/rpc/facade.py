"""RpcFacade: the server-side object whose routes an RPC server exposes.

A facade owns a route table (method name -> callable) and one lock. By default every
route runs under the lock, so a simulator or a model is never entered by two calls at
once, whichever transport or connection they arrive on. ``healthz`` and ``shutdown`` are
built in, answer without the lock (a readiness probe must not wait behind a long step),
and are never implemented by subclasses.
"""

from __future__ import annotations

import inspect
import os
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BUILTIN_ROUTES = ("healthz", "shutdown")


class MethodNotFound(LookupError):
    """No route with that name; travels to the client as RpcMethodNotFound."""


class MalformedCall(TypeError):
    """A call whose method, args or kwargs are malformed, or do not fit the handler; it never ran.

    ``wire_type`` is the error type the caller sees: ``RpcProtocolError`` for a request of the
    wrong shape, ``TypeError`` for arguments the handler's signature does not take (as a local
    call would raise).
    """

    def __init__(self, message: str, *, wire_type: str = "RpcProtocolError") -> None:
        super().__init__(message)
        self.wire_type = wire_type


@dataclass(frozen=True)
class Route:
    fn: Callable[..., Any]
    locked: bool
    # None when the callable has no introspectable signature (some builtins): it checks itself.
    signature: inspect.Signature | None

    @classmethod
    def of(cls, fn: Callable[..., Any], locked: bool) -> Route:
        try:
            signature: inspect.Signature | None = inspect.signature(fn)
        except (TypeError, ValueError):
            signature = None
        return cls(fn, locked, signature)


@dataclass(frozen=True)
class RemoteFailure:
    """What a handler exception becomes on the wire: type name, message, traceback text."""

    type: str
    message: str
    traceback: str = ""

    @classmethod
    def from_exception(cls, exc: BaseException) -> RemoteFailure:
        if isinstance(exc, MalformedCall):  # the caller's mistake: nothing of the server's to show
            return cls(exc.wire_type, str(exc))
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
        self._routes["healthz"] = Route.of(self._healthz, locked=False)
        self._routes["shutdown"] = Route.of(self._request_shutdown, locked=False)

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
        self._routes[name] = Route.of(fn, locked)

    @property
    def lock(self) -> threading.Lock | threading.RLock:
        """The lock locked routes run under; hold it to touch the facade's resources safely."""
        return self._lock

    @property
    def methods(self) -> list[str]:
        return sorted(self._routes)

    def dispatch(self, method: str, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> Any:
        """Run one call. Raises MethodNotFound, MalformedCall (bad call shape or arguments), or
        what the handler raises."""
        route = self._route(method)
        kwargs = {} if kwargs is None else kwargs
        _check_call_shape(args, kwargs)
        if route.signature is not None:
            try:
                route.signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise MalformedCall(f"{method}: {exc}", wire_type="TypeError") from None
        if not route.locked:
            return route.fn(*args, **kwargs)
        with self._lock:
            return route.fn(*args, **kwargs)

    def _route(self, method: Any) -> Route:
        if not isinstance(method, str):
            raise MalformedCall(f"method: must be a str, got {_kind(method)}")
        route = self._routes.get(method)
        if route is None:
            raise MethodNotFound(f"no rpc method {method!r} (available: {', '.join(self.methods)})")
        return route

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


def _check_call_shape(args: Any, kwargs: Any) -> None:
    if not isinstance(args, (list, tuple)):
        raise MalformedCall(f"args: must be a list or tuple, got {_kind(args)}")
    if not isinstance(kwargs, Mapping):
        raise MalformedCall(f"kwargs: must be a dict with str keys, got {_kind(kwargs)}")
    for key in kwargs:
        if not isinstance(key, str):
            raise MalformedCall(f"kwargs: keys must be str, got {_kind(key)} {key!r}")


def _kind(value: Any) -> str:
    return "nothing" if value is None else type(value).__name__
