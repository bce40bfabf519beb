"""Where a VLA policy server listens: an rpent.rpc endpoint, or an openpi websocket (``ws://`` / ``wss://``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rpent.loopback import is_loopback
from rpent.rpc.errors import EndpointError
from rpent.rpc.transport.endpoint import PROTOCOLS, Endpoint, parse_endpoint

WEBSOCKET_SCHEMES = ("ws", "wss")


@dataclass(frozen=True)
class WebsocketEndpoint:
    """An openpi policy server (``serve_policy.py``): ``ws://host:port``, or ``wss://`` behind TLS."""

    secure: bool
    host: str
    port: int

    @property
    def protocol(self) -> str:
        return "wss" if self.secure else "ws"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.protocol}://{host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        return is_loopback(self.host)


VlaEndpoint = Endpoint | WebsocketEndpoint


def parse_vla_endpoint(text: str) -> VlaEndpoint:
    """``[http|socket|ws|wss://]host:port``; EndpointError names the rule that was broken."""
    if not isinstance(text, str):
        raise EndpointError(f"VLA endpoint must be a string like 'ws://127.0.0.1:8000', got {type(text).__name__}")
    scheme, sep, rest = text.strip().partition("://")
    if not sep:
        return parse_endpoint(text)
    scheme = scheme.lower()
    if scheme not in WEBSOCKET_SCHEMES:
        if scheme not in PROTOCOLS:
            supported = ", ".join((*PROTOCOLS, *WEBSOCKET_SCHEMES))
            raise EndpointError(
                f"VLA endpoint {text!r}: protocol {scheme!r} is not supported (use one of: {supported})"
            )
        return parse_endpoint(text)
    if "://" in rest:
        raise EndpointError(f"VLA endpoint {text!r}: only host:port may follow {scheme}://")
    try:
        # Host and port follow the same rules as every other endpoint: one parser for them.
        address = parse_endpoint(rest)
    except EndpointError as exc:
        raise EndpointError(f"VLA endpoint {text!r}: {exc}") from None
    if address.port == 0:
        raise EndpointError(f"VLA endpoint {text!r}: a client needs the policy server's port, not 0")
    return WebsocketEndpoint(secure=scheme == "wss", host=address.host, port=address.port)


def vla_endpoint_arg(value: str) -> VlaEndpoint:
    """``argparse`` ``type=`` helper for ``--vla-endpoint``."""
    try:
        return parse_vla_endpoint(value)
    except EndpointError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
