"""Endpoint strings: ``[protocol://]host:port``, the one parser every server and client uses."""

from __future__ import annotations

import argparse
import ipaddress
import re
from dataclasses import dataclass, replace
from typing import Literal

from rpent.loopback import is_loopback
from rpent.rpc.errors import EndpointError

Protocol = Literal["http", "socket"]
PROTOCOLS: tuple[Protocol, ...] = ("http", "socket")
DEFAULT_PROTOCOL: Protocol = "http"

_HOSTNAME_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


@dataclass(frozen=True)
class Endpoint:
    """Where an RPC server listens. ``port == 0`` means "any free port" and is only valid for servers."""

    protocol: Protocol
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.protocol}://{host}:{self.port}"

    def with_port(self, port: int) -> Endpoint:
        return replace(self, port=port)

    @property
    def is_loopback(self) -> bool:
        """True only for addresses that cannot be reached from another machine.

        Hostnames other than ``localhost`` are not resolved: a name could point anywhere,
        so it counts as non-loopback.
        """
        return is_loopback(self.host)


def _check_host(host: str, text: str) -> None:
    if not host:
        raise EndpointError(f"endpoint {text!r}: host is empty (expected [protocol://]host:port)")
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    if len(host) > 253 or not all(_HOSTNAME_LABEL.match(label) for label in labels):
        raise EndpointError(
            f"endpoint {text!r}: host {host!r} is not a valid hostname or IP address "
            "(IPv6 addresses go in brackets, e.g. [::1]:8000)"
        )


def parse_endpoint(text: str, *, default_protocol: Protocol = DEFAULT_PROTOCOL) -> Endpoint:
    """Parse ``[protocol://]host:port``; protocol is ``http`` (default) or ``socket``.

    Raises EndpointError naming the rule that was broken.
    """
    if not isinstance(text, str):
        raise EndpointError(f"endpoint must be a string like 'http://127.0.0.1:8000', got {type(text).__name__}")
    raw = text.strip()
    if not raw:
        raise EndpointError("endpoint is empty (expected [protocol://]host:port, e.g. socket://127.0.0.1:9000)")
    if any(ch.isspace() for ch in raw):
        raise EndpointError(f"endpoint {text!r}: must not contain whitespace")
    protocol: str = default_protocol
    rest = raw
    if "://" in raw:
        protocol, rest = raw.split("://", 1)
        protocol = protocol.lower()
        if protocol not in PROTOCOLS:
            raise EndpointError(
                f"endpoint {text!r}: protocol {protocol!r} is not supported (use one of: {', '.join(PROTOCOLS)})"
            )
    if any(ch in rest for ch in "/?#@"):
        raise EndpointError(f"endpoint {text!r}: only host:port may follow the protocol (no path, query or user)")
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            raise EndpointError(f"endpoint {text!r}: '[' opens an IPv6 address that is never closed")
        host = rest[1:close]
        after = rest[close + 1 :]
        if not after.startswith(":"):
            raise EndpointError(f"endpoint {text!r}: port is missing after the IPv6 address (expected [addr]:port)")
        port_text = after[1:]
        try:
            if ipaddress.ip_address(host).version != 6:
                raise ValueError
        except ValueError:
            raise EndpointError(f"endpoint {text!r}: {host!r} in brackets is not an IPv6 address") from None
    else:
        if rest.count(":") != 1:
            hint = " (IPv6 addresses go in brackets, e.g. [::1]:8000)" if rest.count(":") > 1 else ""
            raise EndpointError(f"endpoint {text!r}: expected host:port with exactly one ':'{hint}")
        host, port_text = rest.split(":")
        _check_host(host, text)
    if not port_text.isdigit():
        raise EndpointError(f"endpoint {text!r}: port {port_text!r} is not a number (expected 0-65535)")
    port = int(port_text)
    if port > 65535:
        raise EndpointError(f"endpoint {text!r}: port {port} is out of range (expected 0-65535)")
    return Endpoint(protocol=protocol, host=host, port=port)  # type: ignore[arg-type]


def as_endpoint(value: str | Endpoint) -> Endpoint:
    return value if isinstance(value, Endpoint) else parse_endpoint(value)


def endpoint_arg(value: str) -> Endpoint:
    """``argparse`` ``type=`` helper: ``parser.add_argument("--env-endpoint", type=endpoint_arg)``."""
    try:
        return parse_endpoint(value)
    except EndpointError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
