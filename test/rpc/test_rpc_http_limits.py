"""The HTTP server under hostile peers: cross-site requests, stalls, idlers, floods, bad bodies — all answered in JSON."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from rpc_fixtures import ProbeFacade, running
from rpc_limits_support import connect, peak_traced_bytes_of_stalled_peers, read_to_eof, wait_counter, wait_for

from rpent.rpc import RpcClient, RpcServerBusy, UntrustedBindError, serve
from rpent.rpc.transport.http_guard import RequestGuard
from rpent.rpc.transport.limits import ServerLimits

pytestmark = pytest.mark.timeout(60)

JSON = {"Content-Type": "application/json"}


def post(port: int, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, str, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/call", body=body, headers=JSON if headers is None else headers)
        response = conn.getresponse()
        return response.status, response.getheader("content-type", ""), json.loads(response.read())
    finally:
        conn.close()


def split_response(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), head
    return int(head.split()[1]), json.loads(body)


@pytest.fixture()
def port() -> Iterator[int]:
    with running(ProbeFacade(), "http://127.0.0.1:0") as server:
        yield server.endpoint.port


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b'{"method": "echo", "args": [{"__ndarray__": "", "dtype": "<f8", "shape": [0' + b", 1" * 70 + b"]}]}",
            "args[0].__ndarray__: shape [0,1,1,",
        ),
        (
            b'{"method": "echo", "args": [], "kwargs": {"value": {"__ndarray__": "", "dtype": "U0", "shape": [1e11]}}}',
            "kwargs.value.__ndarray__: shape [100000000000.0] is not a list of at most 32 non-negative integers"
            " within the size limit",
        ),
        (
            b'{"method": "echo", "args": [{"__ndarray__": "", "dtype": "O", "shape": [0]}]}',
            "args[0].__ndarray__: dtype 'O' is not allowed",
        ),
        (b'{"method": "echo", "args": 5}', "args: must be a list or tuple, got int"),
        (b'{"method": "echo", "args": [1], "kwargs": [1]}', "kwargs: must be a dict with str keys, got list"),
        (b'{"method": "echo", "arg": [1]}', "body: unknown key 'arg' (a request has method, args, kwargs)"),
        (b'{"args": [1]}', "method: must be a str, got nothing"),
        (b"[1, 2]", "body: must be a JSON object with method, args and kwargs, got list"),
        (b"{not json", "body: not valid JSON"),
    ],
)
def test_codec_errors_and_malformed_calls_are_400_json_naming_the_field(port: int, body: bytes, message: str) -> None:
    status, kind, reply = post(port, body)
    assert (status, kind) == (400, "application/json")
    assert reply["ok"] is False and reply["error"]["type"] == "RpcProtocolError"
    assert reply["error"]["message"].startswith(message), reply["error"]["message"]


def test_a_call_with_the_wrong_arguments_is_400_naming_the_method(port: int) -> None:
    status, _, reply = post(port, b'{"method": "echo", "args": [1, 2, 3]}')
    assert status == 400 and reply["error"] == {
        "type": "TypeError",
        "message": "echo: too many positional arguments",
        "traceback": "",
    }


@pytest.mark.parametrize(
    ("headers", "status", "message"),
    [
        ({"Content-Type": "text/plain"}, 415, "Content-Type: must be application/json, got 'text/plain'"),
        ({}, 415, "Content-Type: must be application/json, got nothing"),
        ({**JSON, "Origin": "http://evil.example"}, 403, "Origin: 'http://evil.example' is not this server's origin"),
        ({**JSON, "Origin": "null"}, 403, "Origin: 'null' is not this server's origin"),
        ({**JSON, "Host": "evil.example"}, 421, "Host: 'evil.example' is not a loopback name"),
        ({**JSON, "Host": "evil.example:80", "Origin": "http://evil.example:80"}, 421, "Host: 'evil.example:80'"),
    ],
)
def test_browser_style_cross_site_requests_are_refused(port: int, headers: dict, status: int, message: str) -> None:
    got, kind, reply = post(port, b'{"method": "echo", "args": [1]}', headers)
    assert (got, kind) == (status, "application/json")
    assert reply["error"]["type"] == "RpcProtocolError" and reply["error"]["message"].startswith(message)


def test_same_origin_and_json_with_a_charset_are_served(port: int) -> None:
    headers = {"Content-Type": "Application/JSON; charset=utf-8", "Origin": f"http://127.0.0.1:{port}"}
    assert post(port, b'{"method": "echo", "args": [1]}', headers)[::2] == (200, {"ok": True, "result": 1})
    conn = http.client.HTTPConnection("localhost", port, timeout=10)
    conn.request("GET", "/healthz", headers={"Origin": "http://evil.example"})
    assert conn.getresponse().status == 403  # probes are held to the same origin rule


def test_any_host_is_served_only_when_bound_off_loopback_with_the_opt_in() -> None:
    # Binding off loopback is not done in tests; the guard is checked as the server would build it.
    scope = {
        "type": "http",
        "method": "POST",
        "headers": [(b"host", b"robot-lab:9000"), (b"content-type", b"application/json")],
    }
    assert RequestGuard.for_bind("10.0.0.5", allow_remote=True).refusal(scope) is None
    assert RequestGuard.for_bind("127.0.0.1", allow_remote=True).refusal(scope)[0] == 421
    with_origin = {**scope, "headers": [*scope["headers"], (b"origin", b"http://evil.example")]}
    assert RequestGuard.for_bind("10.0.0.5", allow_remote=True).refusal(with_origin)[0] == 403


def test_a_non_loopback_bind_needs_allow_remote() -> None:
    # Refused before any socket is bound: no traffic leaves loopback.
    with pytest.raises(UntrustedBindError, match=r"--endpoint: '0\.0\.0\.0' is not a loopback .* --allow-remote"):
        serve(ProbeFacade(), "http://0.0.0.0:0")


def test_unparseable_http_and_unknown_routes_are_answered_in_json(port: int) -> None:
    with connect(port) as sock:
        sock.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        status, reply = split_response(read_to_eof(sock))
    assert status == 400 and "not an HTTP request" in reply["error"]["message"]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("GET", "/call")
    response = conn.getresponse()
    assert response.status == 405 and json.loads(response.read())["error"]["type"] == "RpcProtocolError"


def test_a_body_over_the_limit_is_refused_while_it_streams() -> None:
    limits = ServerLimits(max_frame_bytes=100_000)
    with running(ProbeFacade(), "http://127.0.0.1:0", limits=limits) as server:
        with connect(server.endpoint.port) as sock:  # chunked: no length declared up front
            sock.sendall(
                b"POST /call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            for _ in range(4):
                sock.sendall(b"8000\r\n" + b" " * 0x8000 + b"\r\n")
            status, reply = split_response(sock.recv(65536))
        assert status == 413 and "exceeds the limit of 100000" in reply["error"]["message"]


def test_a_request_that_stalls_is_answered_408_and_dropped() -> None:
    limits = ServerLimits(read_timeout_s=0.3)
    with running(ProbeFacade(), "http://127.0.0.1:0", limits=limits) as server:
        for partial in (
            b"POST /call HTTP/1.1\r\nHost: 127.0.0.1\r\n",  # mid-headers
            b"POST /call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 1000\r\n\r\n{"method"',
        ):  # mid-body
            with connect(server.endpoint.port) as sock:
                sock.sendall(partial)
                status, reply = split_response(read_to_eof(sock))
            assert status == 408 and "stalled: no bytes for 0.3 s" in reply["error"]["message"]
        assert server.counters()["dropped_stalled"] == 2
        with RpcClient(server.endpoint) as client:
            assert client.call("echo", ["fine"]) == "fine"


def test_a_slow_handler_is_not_a_stalled_request() -> None:
    facade = ProbeFacade()
    limits = ServerLimits(read_timeout_s=0.2)
    with running(facade, "http://127.0.0.1:0", limits=limits) as server, RpcClient(server.endpoint) as client:
        with ThreadPoolExecutor(1) as pool:
            blocked = pool.submit(client.call, "block")
            assert facade.entered.wait(10)
            time.sleep(0.6)  # well past the read timeout while the handler runs: nothing may be dropped
            facade.release.set()
            assert blocked.result(10) == "released"
        assert server.counters()["dropped_stalled"] == 0


def test_idle_connections_are_closed_and_the_client_reconnects() -> None:
    limits = ServerLimits(idle_timeout_s=0.3)
    with running(ProbeFacade(), "http://127.0.0.1:0", limits=limits) as server:
        with connect(server.endpoint.port) as sock:  # never sends a byte
            assert read_to_eof(sock) == b""
        with RpcClient(server.endpoint) as client:
            assert client.call("echo", [1]) == 1
            wait_counter(server, "dropped_idle", 2)  # the keep-alive connection, once idle
            assert client.call("echo", [2]) == 2


def test_connections_past_the_cap_get_503_json() -> None:
    limits = ServerLimits(max_connections=4)
    with running(ProbeFacade(), "http://127.0.0.1:0", limits=limits) as server:
        held = [connect(server.endpoint.port) for _ in range(4)]
        wait_for(lambda: server.counters()["open_connections"] == 4, what="4 connections open")
        for _ in range(50):
            with connect(server.endpoint.port) as sock:
                status, reply = split_response(read_to_eof(sock))
            assert status == 503 and reply["error"]["type"] == "RpcServerBusy"
            assert "4 connections open (the limit is 4)" in reply["error"]["message"]
        assert server.counters()["refused"] == 50
        held.pop().close()
        wait_for(lambda: server.counters()["open_connections"] == 3, what="a connection freed")
        with RpcClient(server.endpoint) as client:
            assert client.call("echo", ["room again"]) == "room again"
        for sock in held:
            sock.close()


def test_calls_past_the_concurrency_cap_get_503_and_health_probes_still_answer() -> None:
    facade = ProbeFacade()
    limits = ServerLimits(max_active_calls=1)
    with (
        running(facade, "http://127.0.0.1:0", limits=limits) as server,
        RpcClient(server.endpoint) as a,
        RpcClient(server.endpoint) as b,
        ThreadPoolExecutor(1) as pool,
    ):
        blocked = pool.submit(a.call, "block")
        assert facade.entered.wait(10)
        with pytest.raises(RpcServerBusy, match=r"1 calls in progress \(the limit is 1\)"):
            b.call("echo", [1])
        probe = http.client.HTTPConnection("127.0.0.1", server.endpoint.port, timeout=10)
        probe.request("GET", "/healthz")  # probes read no body, so the cap does not apply to them
        assert json.loads(probe.getresponse().read())["ok"] is True
        probe.close()
        facade.release.set()
        assert blocked.result(10) == "released"
        assert b.call("echo", [2]) == 2


def test_a_declared_huge_body_holds_only_what_has_arrived() -> None:
    limits = ServerLimits(read_timeout_s=0.5)
    with running(ProbeFacade(), "http://127.0.0.1:0", limits=limits) as server:
        opening = (b"POST /call HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 250000000\r\n\r\n" + b" " * 300_000)

        def answered(sock: socket.socket) -> None:
            assert split_response(read_to_eof(sock))[0] == 408

        peak = peak_traced_bytes_of_stalled_peers(server.endpoint.port, opening, answered)
        assert peak < 20 * 2**20, f"{peak / 2**20:.0f} MiB held for 1.5 MB of input"
