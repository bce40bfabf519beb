"""One loopback/opt-in rule for every server (socket RPC, HTTP RPC, MCP, dashboard), worded one way.

Nothing here binds a non-loopback address: each refusal happens before a socket is opened.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from rpc_fixtures import ProbeFacade

from rpent.loopback import BindRefused, check_bind
from rpent.rpc import UntrustedBindError, serve

SHAPE = re.compile(r"^--(host|endpoint): '0\.0\.0\.0' is not a loopback address and .+; .+ is required to listen on it")


def _refusal(make: Any) -> str:
    with pytest.raises(ValueError) as err:
        make()
    return str(err.value)


def test_loopback_addresses_need_no_opt_in_and_others_name_the_flag() -> None:
    for host in ("127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost"):
        check_bind(host, opted_in=False, opt_in="--x", exposure="it is open")
    check_bind("0.0.0.0", opted_in=True, opt_in="--x", exposure="it is open")
    with pytest.raises(BindRefused) as err:
        check_bind("robot.lab", opted_in=False, opt_in="--x", exposure="it is open", hint="lab only")
    assert str(err.value) == (
        "--host: 'robot.lab' is not a loopback address and it is open; --x is required to listen on it (lab only)"
    )
    with pytest.raises(BindRefused, match="--host: must not be empty"):
        check_bind("", opted_in=True, opt_in="--x", exposure="it is open")


def test_every_server_refuses_a_non_loopback_bind_with_the_same_message_shape() -> None:
    from rpent.dashboard.cli import DashboardServer
    from rpent.mcp.transports import McpHttpServer, check_host

    messages = {
        "socket rpc": _refusal(lambda: serve(ProbeFacade(), "socket://0.0.0.0:0")),
        "http rpc": _refusal(lambda: serve(ProbeFacade(), "http://0.0.0.0:0")),
        "mcp": _refusal(lambda: check_host("0.0.0.0", allow_remote=False)),
        "mcp server": _refusal(lambda: McpHttpServer(None, host="0.0.0.0")),  # type: ignore[arg-type]
        "dashboard": _refusal(lambda: DashboardServer(None, host="0.0.0.0", port=0)),  # type: ignore[arg-type]
    }
    for server, message in messages.items():
        assert SHAPE.match(message), f"{server}: {message}"
    assert "--trust-network" in messages["socket rpc"]
    assert "--allow-remote" in messages["http rpc"] and "--allow-remote" in messages["mcp"]
    assert "token is required" in messages["dashboard"]


def test_rpc_opt_ins_are_per_transport() -> None:
    # The pickle transport can run code, so its flag is its own; allow_remote does not open it.
    with pytest.raises(UntrustedBindError, match="--trust-network"):
        serve(ProbeFacade(), "socket://0.0.0.0:0", allow_remote=True)
    with pytest.raises(UntrustedBindError, match="--allow-remote"):
        serve(ProbeFacade(), "http://0.0.0.0:0", trust_network=True)
