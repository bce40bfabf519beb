"""The errors an RPC caller can see, as one small hierarchy.

Every error raised to a caller names the endpoint and the method so that a log line
alone says which server and which call went wrong.
"""

from __future__ import annotations


class RpcError(Exception):
    """Base of every error raised by rpent.rpc clients."""

    def __init__(self, message: str, *, endpoint: str = "", method: str = "") -> None:
        self.endpoint = endpoint
        self.method = method
        where = ""
        if method or endpoint:
            where = f"rpc {method or '?'} at {endpoint or '?'}: "
        super().__init__(where + message)


class RpcTimeout(RpcError):
    """The server did not answer within the call's timeout.

    The remote handler may still be running; the connection is dropped and the next
    call opens a fresh one.
    """


class RpcConnectionError(RpcError):
    """The server could not be reached, or the connection broke mid-call.

    Raised for a dead or restarting server. The client reconnects on the next call.
    """


class RpcServerBusy(RpcConnectionError):
    """The server turned the call away at one of its caps (connections, concurrent calls).

    The call never ran, so it is safe to try again later.
    """


class RpcProtocolError(RpcError):
    """A malformed frame or message was sent or received (bad header, oversized, undecodable)."""


class RpcRemoteError(RpcError):
    """The remote handler raised; carries the remote exception type name and message."""

    def __init__(
        self,
        remote_type: str,
        remote_message: str,
        *,
        endpoint: str = "",
        method: str = "",
        remote_traceback: str = "",
    ) -> None:
        self.remote_type = remote_type
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        super().__init__(f"remote {remote_type}: {remote_message}", endpoint=endpoint, method=method)


class RpcMethodNotFound(RpcRemoteError):
    """The server has no route with the requested method name."""


class EndpointError(ValueError):
    """An endpoint string is malformed; the message names the rule it breaks."""
