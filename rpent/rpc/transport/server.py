"""Start a facade's server from Python (``serve``) or from the command line (``main``).

A robot's env_server module defines its facade and ends in a few lines (as robots/libero/env_server.py
does for LiberoEnvFacade)::

    from rpent.rpc import facade_main

    main = facade_main(LiberoEnvFacade, "Serve one LIBERO task ...")

    if __name__ == "__main__":
        raise SystemExit(main())
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict, Unpack

from rpent.rpc.facade import RpcFacade
from rpent.rpc.transport.endpoint import Endpoint, as_endpoint, endpoint_arg
from rpent.rpc.transport.http_server import HttpRpcServer
from rpent.rpc.transport.limits import ServerLimits
from rpent.rpc.transport.server_base import RpcServer, UntrustedBindError
from rpent.rpc.transport.socket_server import SocketRpcServer

# The supervisor reads this line to learn the bound port when it asked for port 0.
READY_PREFIX = "RPENT_RPC_LISTENING "
DEFAULT_SERVER_ENDPOINT = "http://127.0.0.1:0"


class ServerOptions(TypedDict, total=False):
    """What ``make_server`` and ``serve`` take beside the facade and endpoint (defaults in ``make_server``)."""

    trust_network: bool
    allow_remote: bool
    limits: ServerLimits | None


def make_server(
    facade: RpcFacade,
    endpoint: str | Endpoint,
    *,
    trust_network: bool = False,
    allow_remote: bool = False,
    limits: ServerLimits | None = None,
) -> RpcServer:
    """Bind (port 0 picks a free port; see ``server.endpoint``) without serving yet.

    A non-loopback address needs ``trust_network`` (socket) or ``allow_remote`` (http).
    """
    ep = as_endpoint(endpoint)
    if ep.protocol == "socket":
        return SocketRpcServer(facade, ep, trust_network=trust_network, limits=limits)
    return HttpRpcServer(facade, ep, allow_remote=allow_remote, limits=limits)


def serve(facade: RpcFacade, endpoint: str | Endpoint, **options: Unpack[ServerOptions]) -> RpcServer:
    """Serve ``facade`` in background threads and return the running server (options as ``make_server``).

    ``server.endpoint`` has the bound port; ``server.stop()`` or an rpc ``shutdown`` ends it.
    """
    return make_server(facade, endpoint, **options).start()


def _positive(kind: type[float] | type[int]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
        return value

    return parse


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    defaults = ServerLimits()
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
        "--allow-remote",
        action="store_true",
        help="allow the http transport on a non-loopback address (it has no authentication)",
    )
    limits = parser.add_argument_group("limits (see docs/rpc.md)")
    for flag in _LIMIT_FLAGS:
        limits.add_argument(
            flag.name,
            type=_positive(flag.kind),
            default=flag.from_field(getattr(defaults, flag.field)),
            help=f"{flag.help} (default: %(default)s)",
        )
    return parser


def limits_from_args(args: argparse.Namespace) -> ServerLimits:
    return ServerLimits(**{flag.field: flag.to_field(getattr(args, flag.dest)) for flag in _LIMIT_FLAGS})


@dataclass(frozen=True)
class _LimitFlag:
    """The command-line flag of one ServerLimits field, in the unit a person types."""

    name: str
    field: str
    kind: type[float] | type[int]
    help: str
    to_field: Callable[[Any], Any] = lambda value: value
    from_field: Callable[[Any], Any] = lambda value: value

    @property
    def dest(self) -> str:
        return self.name.removeprefix("--").replace("-", "_")  # where argparse puts the value


_LIMIT_FLAGS = (
    _LimitFlag("--max-frame-mb", "max_frame_bytes", float, "largest request accepted, in MiB",
               to_field=lambda mb: int(mb * 2**20), from_field=lambda size: size / 2**20),
    _LimitFlag("--max-connections", "max_connections", int, "connections served at once; more are refused"),
    _LimitFlag("--max-active-calls", "max_active_calls", int,
               "http: requests received or handled at once; more get 503"),
    _LimitFlag("--read-timeout-s", "read_timeout_s", float,
               "drop a peer that sends nothing for this long in the middle of a request"),
    _LimitFlag("--idle-timeout-s", "idle_timeout_s", float, "close a connection without a new request for this long"),
)


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
            allow_remote=args.allow_remote,
            limits=limits_from_args(args),
        )
    except UntrustedBindError as exc:  # the operator's choice of address: one line, no traceback
        facade.close()
        print(f"rpc server: {exc}", file=sys.stderr, flush=True)
        return 2
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


class CommandLineFacade(Protocol):
    """A facade class that adds its own flags to the server's parser and is built from the parsed arguments."""

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None: ...

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RpcFacade: ...


def facade_main(facade: type[CommandLineFacade], description: str) -> Callable[[Sequence[str] | None], int]:
    """The ``main(argv=None)`` of one facade's server module: ``main`` with that facade's flags and construction."""

    def run(argv: Sequence[str] | None = None) -> int:
        return main(argv, facade.from_args, add_arguments=facade.add_arguments, description=description)

    return run
