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


def loopback_hosts(text: str, field: str) -> list[str]:
    """The IPv4 loopback addresses `text` names, in order: `127.0.0.140-169` (a run of the last
    number), `127.0.0.5,127.0.0.9`, or both joined by commas. ValueError names `field` and the rule.

    Simulators that bind one address per robot (franky-sim) take their addresses from such a list,
    so concurrent runs on one machine can each be given their own.
    """
    hosts: list[str] = []
    for part in str(text).split(","):
        part = part.strip()
        first, dash, last = part.partition("-")
        try:
            start = ipaddress.IPv4Address(first)
            end = start if not dash else ipaddress.IPv4Address(f"{first.rsplit('.', 1)[0]}.{last}")
        except ValueError:
            raise ValueError(f"{field}: expected addresses like 127.0.0.140-169 or 127.0.0.5,127.0.0.9, got {text!r}") from None
        if not (start.is_loopback and end.is_loopback):
            raise ValueError(f"{field}: {part} is not a loopback address (127.x.y.z)")
        if end < start:
            raise ValueError(f"{field}: range {part} runs backwards")
        hosts += [str(ipaddress.IPv4Address(n)) for n in range(int(start), int(end) + 1)]
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"{field}: {text!r} names an address twice")
    return hosts


def hosts_text(hosts: list[str]) -> str:
    """`loopback_hosts`' form of `hosts`: `127.0.0.140-154` for a run of the last number, else a comma list."""
    if len(hosts) > 1:
        numbers = [int(ipaddress.IPv4Address(h)) for h in hosts]
        same_prefix = len({h.rsplit(".", 1)[0] for h in hosts}) == 1
        if same_prefix and numbers == list(range(numbers[0], numbers[0] + len(numbers))):
            return f"{hosts[0]}-{hosts[-1].rsplit('.', 1)[1]}"
    return ",".join(hosts)


def split_hosts(hosts: list[str], parts: int) -> list[list[str]]:
    """`hosts` cut into `parts` contiguous blocks of (nearly) equal size, none empty."""
    if not 1 <= parts <= len(hosts):
        raise ValueError(f"cannot cut {len(hosts)} addresses into {parts} blocks of at least one")
    size, extra = divmod(len(hosts), parts)
    blocks, at = [], 0
    for index in range(parts):
        end = at + size + (1 if index < extra else 0)
        blocks.append(hosts[at:end])
        at = end
    return blocks
