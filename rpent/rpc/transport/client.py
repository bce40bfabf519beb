"""RpcClient: call a facade's methods over ``http`` or ``socket``, chosen by the endpoint."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from rpent.rpc.errors import EndpointError, RpcMethodNotFound, RpcProtocolError, RpcRemoteError, RpcServerBusy
from rpent.rpc.transport.endpoint import Endpoint, as_endpoint
from rpent.rpc.transport.http_client import HttpTransport
from rpent.rpc.transport.limits import DEFAULT_MAX_FRAME_BYTES
from rpent.rpc.transport.socket_client import SocketTransport

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0


class Transport(Protocol):
    def call(
        self, method: str, args: Sequence[Any], kwargs: Mapping[str, Any], timeout_s: float
    ) -> tuple[str, Any]: ...

    def close(self) -> None: ...


class RpcClient:
    """A connection to one RPC server. Thread-safe; reconnects on the call after a failure.

    Errors: RpcTimeout, RpcConnectionError, RpcProtocolError, RpcRemoteError (the handler
    raised; ``remote_type`` / ``remote_message``), all RpcError, all naming endpoint and method.
    """

    def __init__(
        self,
        endpoint: str | Endpoint,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self.endpoint = as_endpoint(endpoint)
        if self.endpoint.port == 0:
            raise EndpointError(f"endpoint {self.endpoint}: a client needs the server's port, not 0")
        if timeout_s <= 0 or connect_timeout_s <= 0:
            raise ValueError("timeout_s and connect_timeout_s must be > 0")
        self.timeout_s = timeout_s
        self._transport: Transport
        if self.endpoint.protocol == "socket":
            self._transport = SocketTransport(
                self.endpoint, connect_timeout_s=connect_timeout_s, max_frame_bytes=max_frame_bytes
            )
        else:
            self._transport = HttpTransport(self.endpoint, connect_timeout_s=connect_timeout_s)

    def call(
        self,
        method: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> Any:
        """Call ``method(*args, **kwargs)`` on the server and return its result."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        status, value = self._transport.call(method, args, kwargs or {}, timeout)
        if status == "ok":
            return value
        where = {"endpoint": str(self.endpoint), "method": method}
        try:
            kind, message = str(value["type"]), str(value["message"])
        except (KeyError, TypeError):
            raise RpcProtocolError("error reply without type and message", **where) from None
        if kind == "RpcProtocolError":
            raise RpcProtocolError(f"server rejected the request: {message}", **where)
        if kind == "RpcServerBusy":
            raise RpcServerBusy(message, **where)
        cls = RpcMethodNotFound if kind == "RpcMethodNotFound" else RpcRemoteError
        raise cls(kind, message, remote_traceback=str(value.get("traceback", "")), **where)

    def healthz(self, *, timeout_s: float = 2.0) -> dict[str, Any]:
        return self.call("healthz", timeout_s=timeout_s)

    def shutdown(self, *, timeout_s: float = 5.0) -> None:
        """Ask the server to stop after replying."""
        self.call("shutdown", timeout_s=timeout_s)

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> RpcClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
