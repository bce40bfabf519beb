"""The socket server under hostile peers: bytes held only as they arrive, stalls and idlers dropped, a connection cap."""

from __future__ import annotations

import socket
import struct
import threading

import numpy as np
import pytest
from rpc_fixtures import ProbeFacade, running
from rpc_limits_support import connect, peak_traced_bytes_of_stalled_peers, read_to_eof, wait_counter, wait_for

from rpent.rpc import RpcClient, RpcServerBusy
from rpent.rpc.transport.framing import MAGIC, encode_frame, recv_frame, send_frame
from rpent.rpc.transport.limits import ServerLimits

pytestmark = pytest.mark.timeout(60)


def _header(*lengths: int) -> bytes:
    return struct.pack(f"!4sI{len(lengths)}Q", MAGIC, len(lengths), *lengths)


def test_a_header_declaring_255_mib_reserves_only_what_has_arrived() -> None:
    limits = ServerLimits(read_timeout_s=0.5)
    with running(ProbeFacade(), "socket://127.0.0.1:0", limits=limits) as server:
        def answered(sock: socket.socket) -> None:  # a stalled frame is dropped at the read timeout, with an error
            status, error = recv_frame(sock)
            assert status == "error" and "stalled" in error["message"]
            assert read_to_eof(sock) == b""

        peak = peak_traced_bytes_of_stalled_peers(server.endpoint.port, _header(255 * 2**20) + b"\x80" * 300_000,
                                                  answered)
        assert peak < 8 * 2**20, f"{peak / 2**20:.0f} MiB held for 1.5 MB of input"
        assert server.counters()["dropped_stalled"] == 5


def test_a_frame_that_arrives_in_full_is_read_whatever_its_size() -> None:
    big = np.arange(3_000_000, dtype=np.float64)  # 24 MB: several growth steps past the first chunk
    with running(ProbeFacade(), "socket://127.0.0.1:0") as server, RpcClient(server.endpoint) as client:
        assert np.array_equal(client.call("echo", [big]), big)


def test_a_peer_that_stalls_mid_frame_gets_an_error_frame_and_is_dropped() -> None:
    limits = ServerLimits(read_timeout_s=0.3)
    with running(ProbeFacade(), "socket://127.0.0.1:0", limits=limits) as server:
        frame = b"".join(bytes(c) for c in encode_frame(("echo", (np.zeros(1000),), {})))
        with connect(server.endpoint.port) as sock:
            sock.sendall(frame[:60])
            status, error = recv_frame(sock)
            assert status == "error" and error["type"] == "RpcProtocolError"
            assert "stalled: no bytes for 0.3 s in the middle of a frame" in error["message"]
            assert read_to_eof(sock) == b""
        assert server.counters()["dropped_stalled"] == 1
        with RpcClient(server.endpoint) as client:
            assert client.call("echo", ["fine"]) == "fine"


def test_a_connection_idle_between_requests_is_closed_after_the_idle_timeout() -> None:
    limits = ServerLimits(idle_timeout_s=0.3)
    with running(ProbeFacade(), "socket://127.0.0.1:0", limits=limits) as server:
        with connect(server.endpoint.port) as sock:
            send_frame(sock, ("echo", (1,), {}))
            assert recv_frame(sock) == ("ok", 1)
            assert read_to_eof(sock) == b""  # closed quietly: nothing was in flight
        counters = wait_counter(server, "dropped_idle", 1)
        assert counters["dropped_stalled"] == 0
        with RpcClient(server.endpoint) as client:  # a pooled connection the server closed is replaced
            assert client.call("echo", [2]) == 2
            wait_counter(server, "dropped_idle", 2)
            assert client.call("echo", [3]) == 3


def test_connections_past_the_cap_get_a_busy_error_frame_and_threads_stay_bounded() -> None:
    limits = ServerLimits(max_connections=8)
    with running(ProbeFacade(), "socket://127.0.0.1:0", limits=limits) as server:
        threads_before = threading.active_count()
        held = [connect(server.endpoint.port) for _ in range(8)]
        wait_for(lambda: server.counters()["open_connections"] == 8, what="8 connections open")
        refused = 0
        for _ in range(192):
            with connect(server.endpoint.port) as sock:
                status, error = recv_frame(sock)
                assert status == "error" and error["type"] == "RpcServerBusy"
                assert "8 connections open (the limit is 8)" in error["message"]
                assert read_to_eof(sock) == b""
                refused += 1
        assert refused == 192 and server.counters()["refused"] == 192
        assert threading.active_count() <= threads_before + 8
        with RpcClient(server.endpoint) as client:
            with pytest.raises(RpcServerBusy, match="the limit is 8"):
                client.call("echo", ["no room"])
            held.pop().close()
            wait_for(lambda: server.counters()["open_connections"] == 7, what="a connection freed")
            assert client.call("echo", ["room again"]) == "room again"
        for sock in held:
            sock.close()


@pytest.mark.parametrize(
    ("request_", "kind", "message"),
    [
        (("echo", 5, {}), "RpcProtocolError", "args: must be a list or tuple, got int"),
        (("echo", (1,), [1]), "RpcProtocolError", "kwargs: must be a dict with str keys, got list"),
        (("echo", (1,), {1: 2}), "RpcProtocolError", "kwargs: keys must be str, got int 1"),
        ((7, (), {}), "RpcProtocolError", "method: must be a str, got int"),
        (("echo", (1, 2, 3), {}), "TypeError", "echo: too many positional arguments"),
        (("echo", (), {"nope": 1}), "TypeError", "echo: missing a required argument: 'value'"),
    ],
)
def test_malformed_call_shapes_get_an_error_frame_naming_the_field(request_: tuple, kind: str, message: str) -> None:
    with running(ProbeFacade(), "socket://127.0.0.1:0") as server, connect(server.endpoint.port) as sock:
        send_frame(sock, request_)
        status, error = recv_frame(sock)
        assert status == "error" and error["type"] == kind and error["message"] == message
        send_frame(sock, ("echo", ("still here",), {}))
        assert recv_frame(sock) == ("ok", "still here")


def test_limits_refuse_nonsense_naming_the_field() -> None:
    with pytest.raises(ValueError, match="max_connections: must be a number > 0, got 0"):
        ServerLimits(max_connections=0)
    with pytest.raises(ValueError, match=r"max_active_calls: must be an integer, got 2\.5"):
        ServerLimits(max_active_calls=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="read_timeout_s: must be a number > 0, got True"):
        ServerLimits(read_timeout_s=True)


def test_server_command_line_sets_the_limits(capsys: pytest.CaptureFixture[str]) -> None:
    from rpent.rpc.transport.server import build_parser, limits_from_args

    args = build_parser().parse_args(["--max-connections", "5", "--read-timeout-s", "2.5", "--max-frame-mb", "1"])
    assert limits_from_args(args) == ServerLimits(max_connections=5, read_timeout_s=2.5, max_frame_bytes=2**20)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--idle-timeout-s", "0"])
    assert "argument --idle-timeout-s: must be > 0, got 0" in capsys.readouterr().err
