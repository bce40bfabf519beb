"""The one place that decides whether an address is loopback, and that opens listening sockets.

Servers bind 127.0.0.1 by default; a non-loopback address needs an explicit opt-in wherever it is
accepted (RPC, MCP, dashboard), and all of them judge addresses the same way.
"""

from __future__ import annotations

import ipaddress
import socket


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


def listen(host: str, port: int, backlog: int = 128) -> socket.socket:
    """A listening TCP socket (SO_REUSEADDR on POSIX); port 0 picks a free port (see getsockname)."""
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=backlog)
