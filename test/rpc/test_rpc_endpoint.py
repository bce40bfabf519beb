import argparse

import pytest

from rpent.rpc import Endpoint, EndpointError, endpoint_arg, parse_endpoint


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:8000", Endpoint("http", "127.0.0.1", 8000)),
        ("http://localhost:80", Endpoint("http", "localhost", 80)),
        ("socket://127.0.0.1:0", Endpoint("socket", "127.0.0.1", 0)),
        ("SOCKET://sim-host.lab:9000", Endpoint("socket", "sim-host.lab", 9000)),
        ("socket://[::1]:9000", Endpoint("socket", "::1", 9000)),
        ("  http://127.0.0.2:65535 ", Endpoint("http", "127.0.0.2", 65535)),
    ],
)
def test_valid_endpoints_parse_with_http_as_default_protocol(text: str, expected: Endpoint) -> None:
    assert parse_endpoint(text) == expected


def test_endpoint_string_form_parses_back_to_the_same_endpoint() -> None:
    for ep in (Endpoint("http", "127.0.0.1", 1), Endpoint("socket", "::1", 2)):
        assert parse_endpoint(str(ep)) == ep
    assert str(Endpoint("socket", "::1", 2)) == "socket://[::1]:2"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("", "empty"),
        ("127.0.0.1", "exactly one ':'"),
        ("grpc://127.0.0.1:80", "protocol 'grpc' is not supported"),
        ("http://127.0.0.1:http", "not a number"),
        ("http://127.0.0.1:70000", "out of range"),
        ("http://127.0.0.1:-1", "not a number"),
        ("http://:8000", "host is empty"),
        ("http://127.0.0.1:8000/call", "no path"),
        ("http://user@127.0.0.1:8000", "no path, query or user"),
        ("::1:8000", "IPv6 addresses go in brackets"),
        ("[127.0.0.1]:80", "is not an IPv6 address"),
        ("[::1:80", "never closed"),
        ("http://bad_host!:80", "not a valid hostname"),
        ("http://127.0.0.1: 80", "whitespace"),
    ],
)
def test_malformed_endpoints_fail_at_parse_time_naming_the_rule(text: str, rule: str) -> None:
    with pytest.raises(EndpointError) as err:
        parse_endpoint(text)
    assert rule in str(err.value)
    assert isinstance(err.value, ValueError)


def test_argparse_type_helper_reports_the_rule_as_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="robot")
    parser.add_argument("--env-endpoint", type=endpoint_arg)
    assert parser.parse_args(["--env-endpoint", "socket://127.0.0.1:5555"]).env_endpoint == Endpoint(
        "socket", "127.0.0.1", 5555
    )
    with pytest.raises(SystemExit):
        parser.parse_args(["--env-endpoint", "ftp://x:1"])
    err = capsys.readouterr().err
    assert "--env-endpoint" in err and "protocol 'ftp' is not supported" in err


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("localhost", True),
        ("::1", True),
        # Address strings only: classified, never connected to.
        ("0.0.0.0", False),
        ("192.168.1.10", False),
        ("robot.lab", False),
    ],
)
def test_only_loopback_addresses_count_as_loopback(host: str, loopback: bool) -> None:
    assert Endpoint("socket", host, 1).is_loopback is loopback
