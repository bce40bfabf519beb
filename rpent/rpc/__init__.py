"""Inter-process RPC for runtimes living in another process or machine (docs/rpc.md)."""

from rpent.rpc.client import RpcClient
from rpent.rpc.endpoint import Endpoint, endpoint_arg, parse_endpoint
from rpent.rpc.env import BaseEnvClient, BaseEnvFacade
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
from rpent.rpc.limits import ServerLimits
from rpent.rpc.server import facade_main, main, serve
from rpent.rpc.server_base import RpcServer, UntrustedBindError
from rpent.rpc.supervisor import ServerProcess, ServerStartError
from rpent.rpc.vla import BaseVLAClient, BaseVLAFacade

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
