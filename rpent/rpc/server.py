"""Start a facade's server from Python (``serve``) or from the command line (``main``).

A robot's env_server module is then a few lines::

    from rpent.rpc import main
    from robots.libero.env_facade import LiberoEnvFacade

    if __name__ == "__main__":
        raise SystemExit(main(facade_factory=LiberoEnvFacade.from_args, add_arguments=LiberoEnvFacade.add_arguments))
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence

from rpent.rpc.endpoint import Endpoint, as_endpoint, endpoint_arg
from rpent.rpc.facade import RpcFacade
from rpent.rpc.framing import DEFAULT_MAX_FRAME_BYTES
from rpent.rpc.http_server import HttpRpcServer
from rpent.rpc.server_base import RpcServer
from rpent.rpc.socket_server import SocketRpcServer

# The supervisor reads this line to learn the bound port when it asked for port 0.
READY_PREFIX = "RPENT_RPC_LISTENING "
DEFAULT_SERVER_ENDPOINT = "http://127.0.0.1:0"


def make_server(
    facade: RpcFacade,
    endpoint: str | Endpoint,
    *,
    trust_network: bool = False,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> RpcServer:
    """Bind (port 0 picks a free port; see ``server.endpoint``) without serving yet."""
    ep = as_endpoint(endpoint)
    cls = SocketRpcServer if ep.protocol == "socket" else HttpRpcServer
    return cls(facade, ep, trust_network=trust_network, max_frame_bytes=max_frame_bytes)


def serve(
    facade: RpcFacade,
    endpoint: str | Endpoint,
    *,
    trust_network: bool = False,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> RpcServer:
    """Serve ``facade`` in background threads and return the running server.

    ``server.endpoint`` has the bound port; ``server.stop()`` or an rpc ``shutdown`` ends it.
    """
    return make_server(facade, endpoint, trust_network=trust_network, max_frame_bytes=max_frame_bytes).start()


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--endpoint",
        type=endpoint_arg,
        default=endpoint_arg(DEFAULT_SERVER_ENDPOINT),
        help="[http|socket://]host:port to listen on; port 0 picks a free port (default: %(default)s)",
    )
    parser.add_argument(
        "--trust-network",
        action="store_true",
        help="allow the pickle socket transport on a non-loopback address (every peer can run code here)",
    )
    parser.add_argument(
        "--max-frame-mb",
        type=float,
        default=DEFAULT_MAX_FRAME_BYTES / 2**20,
        help="largest request accepted, in MiB (default: %(default)s)",
    )
    return parser


def main(
    argv: Sequence[str] | None = None,
    facade_factory: Callable[[argparse.Namespace], RpcFacade] | None = None,
    *,
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
    description: str | None = None,
) -> int:
    """Command-line entry of an RPC server: parse flags, build the facade, serve until stopped.

    ``facade_factory`` receives the parsed arguments (with the robot's own flags added by
    ``add_arguments``). Serving ends on SIGINT, SIGTERM or an rpc ``shutdown``. Prints
    ``RPENT_RPC_LISTENING <endpoint>`` on stdout once the port accepts connections.
    """
    if facade_factory is None:
        raise TypeError("main() needs a facade_factory")
    parser = build_parser(description)
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    facade = facade_factory(args)
    try:
        server = make_server(
            facade,
            args.endpoint,
            trust_network=args.trust_network,
            max_frame_bytes=int(args.max_frame_mb * 2**20),
        )
    except Exception:
        facade.close()
        raise
    stop = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    print(f"{READY_PREFIX}{server.endpoint}", flush=True)
    try:
        while not stop.is_set() and not server.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    print(f"rpc server {server.endpoint} stopped", file=sys.stderr, flush=True)
    return 0
