"""The one place that decides whether a server may listen on an address, and that opens listening sockets.

Servers bind 127.0.0.1 by default. A non-loopback address needs the server's explicit opt-in
(socket RPC: --trust-network; HTTP RPC and MCP: --allow-remote; dashboard: an access token),
and every server judges addresses and words its refusal the same way, through `check_bind`.
"""

from __future__ import annotations

import ipaddress
import socket


class BindRefused(ValueError):
    """A server was asked to listen on a non-loopback address without its opt-in."""


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 (bracketed or not) and 'localhost'.

    Other hostnames are not resolved: a name could point anywhere, so it counts as non-loopback.
    """
    host = host.strip("[]")
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(
    host: str,
    *,
    opted_in: bool,
    opt_in: str,
    exposure: str,
    hint: str = "",
    field: str = "--host",
    error: type[ValueError] = BindRefused,
) -> None:
    """Allow any loopback address; allow another address only with the server's opt-in.

    `opt_in` names what the user gives to opt in (a flag), `exposure` says what anyone who
    reaches the port could do, `field` is the flag or parameter that carried the address, and
    `error` is the exception type the calling server raises for bad configuration.
    """
    if not host:
        raise error(f"{field}: must not be empty")
    if opted_in or is_loopback(host):
        return
    tail = f" ({hint})" if hint else ""
    raise error(
        f"{field}: {host!r} is not a loopback address and {exposure}; {opt_in} is required to listen on it{tail}"
    )


def listen(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A listening TCP socket (SO_REUSEADDR on POSIX); port 0 picks a free port (see getsockname)."""
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=backlog)
