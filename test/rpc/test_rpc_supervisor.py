"""Servers as supervised child processes: readiness, stop, early death, crash and restart."""

from __future__ import annotations

import numpy as np
import pytest

from rpent.rpc import RpcConnectionError, ServerProcess, ServerStartError
from rpent.rpc.facades.vla import BaseVLAClient
from rpent.rpc.transport.endpoint import Endpoint

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
MODULE = "rpent.rpc.facades.reference_vla"


@pytest.mark.parametrize("protocol", ["http", "socket"])
def test_child_server_is_ready_on_its_reported_port_and_stops_cleanly(protocol: str) -> None:
    server = ServerProcess(MODULE, f"{protocol}://127.0.0.1:0", args=["--chunk-size", "3"])
    endpoint = server.start()
    try:
        assert endpoint.protocol == protocol and endpoint.port != 0
        with BaseVLAClient(endpoint) as client:
            assert client.healthz()["pid"] == server.pid
            chunk = client.predict({"robot0_eef_pos": np.zeros(3), "target_pos": np.ones(3)}, "reach")
        assert chunk.shape == (3, 7)
    finally:
        code = server.stop()
    assert code == 0  # left through the rpc shutdown, not a signal
    assert "stopped" in server.stderr_tail()


def test_child_that_dies_before_ready_reports_its_exit_code_and_stderr() -> None:
    server = ServerProcess(MODULE, "socket://127.0.0.1:0", args=["--chunk-size", "many"])
    with pytest.raises(ServerStartError) as err:
        server.start()
    assert "exited with code 2" in str(err.value)
    assert "--chunk-size: invalid int value: 'many'" in err.value.stderr_tail


def test_pickle_server_on_a_non_loopback_address_refuses_to_start_without_trust_network() -> None:
    # Refused before any socket is bound: no traffic leaves loopback.
    with pytest.raises(ServerStartError) as err:
        ServerProcess(MODULE, "socket://0.0.0.0:0").start()
    assert "exited with code 2" in str(err.value)
    # One line naming the flag and the rule, no traceback.
    assert err.value.stderr_tail.strip().splitlines() == [
        "rpc server: --endpoint: '0.0.0.0' is not a loopback address and the socket transport unpickles what it "
        "receives, so any peer could run code in this process; --trust-network (trust_network=True) is required "
        "to listen on it (only on a network where every peer is trusted)"]


def test_child_that_is_not_ready_in_time_is_killed_and_reported() -> None:
    server = ServerProcess(MODULE, "http://127.0.0.1:0", ready_timeout_s=0.001)
    with pytest.raises(ServerStartError, match=r"did not report readiness within 0\.001 s"):
        server.start()
    assert server.returncode is not None  # not left running


def test_crashed_server_gives_a_clear_error_and_a_restart_on_the_same_port_is_picked_up() -> None:
    first = ServerProcess(MODULE, "socket://127.0.0.1:0")
    endpoint = first.start()
    client = BaseVLAClient(endpoint, timeout_s=10, connect_timeout_s=2)
    obs = {"robot0_eef_pos": np.zeros(3), "target_pos": np.ones(3)}
    second: ServerProcess | None = None
    try:
        assert client.predict(obs, "reach").shape == (1, 7)
        assert first._proc is not None
        first._proc.kill()  # a crash: no shutdown, no goodbye
        first._proc.wait(10)
        with pytest.raises(RpcConnectionError) as err:
            client.predict(obs, "reach")
        assert err.value.method == "predict" and err.value.endpoint == str(endpoint)
        second = ServerProcess(MODULE, Endpoint("socket", "127.0.0.1", endpoint.port))
        assert second.start() == endpoint
        assert client.predict(obs, "reach").shape == (1, 7)
    finally:
        client.close()
        first.stop()
        if second is not None:
            second.stop()
