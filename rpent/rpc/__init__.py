"""Inter-process RPC for runtimes living in another process or machine (docs/rpc.md).

Two rooms: `transport/` (endpoints, codec, frames, the http and socket clients and servers, limits)
and `facades/` (the env and VLA facades and clients, the reference VLA server, the supervisor), over
`errors.py` (what a caller can see) and `facade.py` (RpcFacade, what a server dispatches into). The
names below are the package's public API, wherever they live.
"""

from rpent.rpc.errors import (
    EndpointError,
    RpcConnectionError,
    RpcError,
    RpcMethodNotFound,
    RpcProtocolError,
    RpcRemoteError,
    RpcServerBusy,
    RpcTimeout,
)
from rpent.rpc.facade import RpcFacade
from rpent.rpc.facades.env import BaseEnvClient, BaseEnvFacade
from rpent.rpc.facades.supervisor import ServerProcess, ServerStartError
from rpent.rpc.facades.vla import BaseVLAClient, BaseVLAFacade
from rpent.rpc.transport.client import RpcClient
from rpent.rpc.transport.endpoint import Endpoint, endpoint_arg, parse_endpoint
from rpent.rpc.transport.limits import ServerLimits
from rpent.rpc.transport.server import facade_main, main, serve
from rpent.rpc.transport.server_base import RpcServer, UntrustedBindError

__all__ = [
    "BaseEnvClient",
    "BaseEnvFacade",
    "BaseVLAClient",
    "BaseVLAFacade",
    "Endpoint",
    "EndpointError",
    "RpcClient",
    "RpcConnectionError",
    "RpcError",
    "RpcFacade",
    "RpcMethodNotFound",
    "RpcProtocolError",
    "RpcRemoteError",
    "RpcServer",
    "RpcServerBusy",
    "RpcTimeout",
    "ServerLimits",
    "ServerProcess",
    "ServerStartError",
    "UntrustedBindError",
    "endpoint_arg",
    "facade_main",
    "main",
    "parse_endpoint",
    "serve",
]
