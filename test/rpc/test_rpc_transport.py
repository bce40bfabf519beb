"""Both transports over loopback: results, errors, timeouts, restarts, concurrency, bad input."""

from __future__ import annotations

import http.client
import json
import socket
import struct
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from rpc_fixtures import ProbeFacade, running

from rpent.rpc import (
    RpcClient,
    RpcConnectionError,
    RpcMethodNotFound,
    RpcProtocolError,
    RpcRemoteError,
    RpcTimeout,
    UntrustedBindError,
    serve,
)
from rpent.rpc.transport.framing import MAGIC, encode_frame, recv_frame, send_frame
from rpent.rpc.transport.limits import ServerLimits

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["http", "socket"])
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param


def test_server_on_port_zero_reports_its_bound_port(protocol: str) -> None:
    with running(ProbeFacade(), f"{protocol}://127.0.0.1:0") as server:
        assert server.endpoint.port != 0 and server.endpoint.protocol == protocol
        with RpcClient(server.endpoint) as client:
            health = client.healthz()
    assert health["ok"] is True and "echo" in health["methods"] and "shutdown" in health["methods"]


def test_nested_observations_round_trip_with_dtypes_and_kwargs(protocol: str) -> None:
    obs = {
        "image": np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8),
        "history": ({"q": np.arange(7, dtype=">f4")}, [np.float16(0.5), np.bool_(False)]),
        "empty": np.zeros((0, 3)),
    }
    with running(ProbeFacade(), f"{protocol}://127.0.0.1:0") as server, RpcClient(server.endpoint) as client:
        reply = client.call("echo", [obs], {"tag": "t1"})
    assert reply["tag"] == "t1"
    got = reply["value"]
    assert np.array_equal(got["image"], obs["image"]) and got["image"].dtype == np.uint8
    assert got["history"][0]["q"].dtype == np.dtype(">f4")
    assert isinstance(got["history"], tuple) and type(got["history"][1][0]) is np.float16
    assert got["empty"].shape == (0, 3)


def test_remote_exception_reaches_caller_typed_and_server_keeps_serving(protocol: str) -> None:
    with running(ProbeFacade(), f"{protocol}://127.0.0.1:0") as server, RpcClient(server.endpoint) as client:
        with pytest.raises(RpcRemoteError) as err:
            client.call("fail", ["gripper jammed"])
        assert err.value.remote_type == "KeyError" and "gripper jammed" in err.value.remote_message
        assert err.value.method == "fail" and str(server.endpoint) in str(err.value)
        assert "Traceback" in err.value.remote_traceback
        with pytest.raises(RpcMethodNotFound, match="no rpc method 'teleport'"):
            client.call("teleport")
        with pytest.raises(RpcRemoteError, match="TypeError"):
            client.call("echo", [1, 2, 3])
        assert client.call("echo", ["still alive"]) == "still alive"


def test_unencodable_arguments_fail_locally_and_unencodable_results_fail_remotely(protocol: str) -> None:
    with running(ProbeFacade(), f"{protocol}://127.0.0.1:0") as server, RpcClient(server.endpoint) as client:
        if protocol == "http":  # anything picklable travels over socket; JSON is stricter
            with pytest.raises(RpcProtocolError, match="could not be encoded"):
                client.call("echo", [object()])
        else:
            with pytest.raises(RpcProtocolError, match="could not be pickled"):
                client.call("echo", [threading.Lock()])
        with pytest.raises(RpcError_for(protocol)):
            client.call("unpicklable")
        assert client.call("echo", [5]) == 5


def RpcError_for(protocol: str) -> type[Exception]:
    return RpcRemoteError if protocol == "http" else RpcProtocolError


def test_call_timeout_raises_and_the_next_call_works(protocol: str) -> None:
    facade = ProbeFacade()
    with running(facade, f"{protocol}://127.0.0.1:0") as server, RpcClient(server.endpoint) as client:
        with pytest.raises(RpcTimeout) as err:
            client.call("block", timeout_s=0.3)
        assert err.value.method == "block" and str(server.endpoint) in str(err.value)
        assert facade.entered.is_set()
        facade.release.set()  # the abandoned handler finishes and frees the facade lock
        assert client.call("echo", ["after timeout"], timeout_s=10) == "after timeout"


def test_stopped_server_gives_connection_error_and_restart_on_same_port_reconnects(protocol: str) -> None:
    first = serve(ProbeFacade(), f"{protocol}://127.0.0.1:0")
    endpoint = first.endpoint
    client = RpcClient(endpoint, timeout_s=5, connect_timeout_s=2)
    try:
        assert client.call("echo", [1]) == 1
        first.stop()
        with pytest.raises(RpcConnectionError) as err:
            client.call("echo", [2])
        assert err.value.method == "echo" and str(endpoint) in str(err.value)
        with running(ProbeFacade(), str(endpoint)):
            assert client.call("echo", [3]) == 3
    finally:
        client.close()
        first.stop()


def test_facade_lock_keeps_a_second_call_out_until_the_first_returns(protocol: str) -> None:
    facade = ProbeFacade()
    with (
        running(facade, f"{protocol}://127.0.0.1:0") as server,
        RpcClient(server.endpoint) as a,
        RpcClient(server.endpoint) as b,
        ThreadPoolExecutor(2) as pool,
    ):
        blocked = pool.submit(a.call, "block")
        assert facade.entered.wait(10)
        second = pool.submit(b.call, "tracked", [np.ones(2)])
        assert not facade.tracked_entered.wait(0.5)  # the request is there, the handler may not start
        assert not second.done()
        facade.release.set()
        assert blocked.result(timeout=10) == "released"
        assert second.result(timeout=10).tolist() == [2.0, 2.0]


def test_healthz_answers_while_a_long_call_holds_the_lock(protocol: str) -> None:
    facade = ProbeFacade()
    with (
        running(facade, f"{protocol}://127.0.0.1:0") as server,
        ThreadPoolExecutor(1) as pool,
        RpcClient(server.endpoint) as a,
        RpcClient(server.endpoint) as probe,
    ):
        blocked = pool.submit(a.call, "block")
        assert facade.entered.wait(10)
        assert probe.healthz(timeout_s=5)["ok"] is True
        facade.release.set()
        assert blocked.result(timeout=10) == "released"


def test_concurrent_clients_each_get_their_own_answers_one_handler_at_a_time(protocol: str) -> None:
    facade = ProbeFacade()

    def worker(index: int) -> bool:
        with RpcClient(server.endpoint) as client:
            for j in range(15):
                value = np.full((32, 32), index * 100 + j, dtype=np.int32)
                if not np.array_equal(client.call("tracked", [value]), value * 2):
                    return False
        return True

    with running(facade, f"{protocol}://127.0.0.1:0") as server, ThreadPoolExecutor(6) as pool:
        assert all(pool.map(worker, range(6), timeout=60))
    assert facade.max_active == 1


def test_one_client_shared_by_threads_gets_matching_replies(protocol: str) -> None:
    with (
        running(ProbeFacade(), f"{protocol}://127.0.0.1:0") as server,
        RpcClient(server.endpoint) as client,
        ThreadPoolExecutor(4) as pool,
    ):
        results = list(pool.map(lambda i: client.call("echo", [i]), range(40), timeout=60))
    assert results == list(range(40))


def test_shutdown_rpc_replies_then_stops_the_server_and_closes_the_facade(protocol: str) -> None:
    facade = ProbeFacade()
    server = serve(facade, f"{protocol}://127.0.0.1:0")
    try:
        with RpcClient(server.endpoint) as client:
            client.shutdown()
        assert server.wait(10)
        assert facade.closed
        with pytest.raises(RpcConnectionError), RpcClient(server.endpoint, connect_timeout_s=1) as late:
            late.call("echo", [1])
    finally:
        server.stop()


def test_pickle_socket_server_refuses_non_loopback_address_without_trust_network() -> None:
    # Refused before any socket is bound: no traffic leaves loopback.
    with pytest.raises(UntrustedBindError, match="--trust-network"):
        serve(ProbeFacade(), "socket://0.0.0.0:0")


# -- malformed input ------------------------------------------------------------------------------
def _raw_post(port: int, body: bytes, path: str = "/call") -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


def test_http_server_rejects_malformed_and_oversized_bodies_and_keeps_serving() -> None:
    with running(ProbeFacade(), "http://127.0.0.1:0", limits=ServerLimits(max_frame_bytes=10_000)) as server:
        port = server.endpoint.port
        probe = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        probe.request("GET", "/healthz")
        assert json.loads(probe.getresponse().read())["ok"] is True  # plain probes (curl) work too
        probe.close()
        status, body = _raw_post(port, b"{not json")
        assert status == 400 and body["error"]["type"] == "RpcProtocolError"
        status, body = _raw_post(port, b'{"args": []}')
        assert status == 400 and body["error"]["message"] == "method: must be a str, got nothing"
        status, body = _raw_post(
            port, b'{"method": "echo", "args": [{"__ndarray__": "!!", "dtype": "u1", "shape": [1]}]}'
        )
        assert status == 400 and "base64" in body["error"]["message"]
        status, body = _raw_post(port, b"x" * 20_000)
        assert status == 413 and "exceeds the limit" in body["error"]["message"]
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:  # hangs up mid-body
            sock.sendall(
                b"POST /call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b'Content-Length: 5000\r\n\r\n{"method"'
            )
        with RpcClient(server.endpoint) as client:
            with pytest.raises(RpcProtocolError, match="exceeds the limit"):
                client.call("echo", [np.zeros(20_000, np.uint8)])
            assert client.call("echo", ["fine"]) == "fine"


def _raw_socket(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def test_socket_server_answers_garbage_with_an_error_frame_and_keeps_serving() -> None:
    with running(ProbeFacade(), "socket://127.0.0.1:0", limits=ServerLimits(max_frame_bytes=10_000)) as server:
        port = server.endpoint.port
        with _raw_socket(port) as sock:  # an HTTP client knocking on the wrong door
            sock.sendall(b"POST /call HTTP/1.1\r\nHost: x\r\n\r\n")
            status, error = recv_frame(sock)
            assert status == "error" and "not an rpent frame" in error["message"]
        with _raw_socket(port) as sock:  # a header announcing 1 GiB
            sock.sendall(struct.pack("!4sIQ", MAGIC, 1, 2**30))
            status, error = recv_frame(sock)
            assert status == "error" and "exceeds the limit of 10000" in error["message"]
        with _raw_socket(port) as sock:  # well framed but not a pickle: the connection stays usable
            garbage = b"\x80\x05not a pickle"
            sock.sendall(struct.pack("!4sIQ", MAGIC, 1, len(garbage)) + garbage)
            status, error = recv_frame(sock)
            assert status == "error" and "does not unpickle" in error["message"]
            send_frame(sock, "not a request tuple")
            status, error = recv_frame(sock)
            assert status == "error" and "(method, args, kwargs)" in error["message"]
            send_frame(sock, ("echo", (7,), {}))
            assert recv_frame(sock) == ("ok", 7)
        with _raw_socket(port) as sock:  # a peer vanishing mid-frame
            chunks = encode_frame(("echo", (np.zeros(1000),), {}))
            sock.sendall(b"".join(bytes(c) for c in chunks)[:50])
        with RpcClient(server.endpoint) as client:
            assert client.call("echo", ["fine"]) == "fine"


def test_client_rejects_an_oversized_reply_and_reconnects() -> None:
    with (
        running(ProbeFacade(), "socket://127.0.0.1:0") as server,
        RpcClient(server.endpoint, max_frame_bytes=5_000) as client,
    ):
        with pytest.raises(RpcProtocolError, match="exceeds the limit of 5000"):
            client.call("echo", [np.zeros(10_000, np.uint8)])
        assert client.call("echo", [1]) == 1
