"""Soak: live RPC and tool servers under malformed frames, stalled connections and fuzzed tool calls.

Run: ``python bench/soak_servers.py [--frames 2000] [--stalled 200] [--tool-calls 10000]`` from the
repository root (``--tool-calls 0`` skips the tool server). Everything runs on 127.0.0.1.

1. A child process serves one echo facade on both RPC transports (socket and http), with the
   default limits except short timeouts (``--read-timeout-s``, ``--idle-timeout-s``) so that a
   soak takes seconds. Its resident memory (``VmRSS`` of ``/proc/<pid>/status``) is read after a
   warm-up and again at the end; the aim is growth under 50 MB.
2. ``--frames`` malformed requests per transport, cycling through kinds: bad headers, huge
   declared lengths (over the limit, and under it but never sent), truncated frames, bad pickle /
   bad JSON, bad array tags, wrong call shapes, forbidden HTTP requests. Each must get the
   documented answer (an error frame, or a 4xx JSON body naming the problem) or, for a frame the
   peer abandons, a closed connection; anything else is counted as unexpected.
3. ``--stalled`` connections held at once, half per transport, each half split between half-sent
   requests (declaring 200 MiB) and idle sockets. Each must end: refused at once past the
   connection cap, or dropped at the read or idle timeout. Resident memory is read while they
   are held.
4. A normal call on each transport must still work afterwards.
5. Tool calls (the hook for "10,000 fuzzed tool calls against a live tool server counting lost
   step lines"): ``rpent serve-mcp --robot toy --http`` in a child process, driven by the ``mcp``
   SDK client with arguments fuzzed from each tool's input schema (seeded). Every call that
   reaches the toolkit must leave exactly one steps.jsonl line; the soak counts calls answered
   against lines written after the server has shut down.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rpent.rpc import RpcClient, RpcFacade, RpcServer, ServerLimits, serve
from rpent.rpc.transport.framing import MAGIC, encode_frame, recv_frame

READY = "SOAK_READY "
RSS_GROWTH_AIM_MB = 50.0


# -- child: both RPC transports for one echo facade --------------------------------------------
class SoakFacade(RpcFacade):
    def __init__(self) -> None:
        super().__init__()
        self.servers: dict[str, RpcServer] = {}
        self._register_rpc("echo", lambda value: value)
        self._register_rpc("counters", lambda: {k: s.counters() for k, s in self.servers.items()}, locked=False)


def serve_child(limits: ServerLimits) -> None:
    facade = SoakFacade()
    facade.servers = {p: serve(facade, f"{p}://127.0.0.1:0", limits=limits) for p in ("socket", "http")}
    logging.getLogger("uvicorn.error").setLevel(logging.ERROR)  # else one warning per garbage request
    ready = {p: str(s.endpoint) for p, s in facade.servers.items()}
    print(READY + json.dumps({**ready, "pid": os.getpid()}), flush=True)
    try:
        sys.stdin.read()  # the parent closes stdin (or dies) to end the child
    finally:
        for server in facade.servers.values():
            server.stop()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


# -- malformed requests ---------------------------------------------------------------------------
def _conn(port: int, timeout_s: float = 10.0) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=timeout_s)


def _read_to_eof(sock: socket.socket) -> bytes:
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


def _frame_header(*lengths: int) -> bytes:
    return struct.pack(f"!4sI{len(lengths)}Q", MAGIC, len(lengths), *lengths)


def _raw_frame(obj: Any) -> bytes:
    return b"".join(bytes(c) for c in encode_frame(obj))


def _socket_expect(payload: bytes, kind: str, text: str) -> Callable[[int], str]:
    def probe(port: int) -> str:
        with _conn(port) as sock:
            sock.sendall(payload)
            status, error = recv_frame(sock)
        if status == "error" and error.get("type") == kind and text in error.get("message", ""):
            return "answered"
        return f"unexpected reply {status} {error!r:.120}"

    return probe


def _socket_abandoned(payload: bytes) -> Callable[[int], str]:
    def probe(port: int) -> str:
        with _conn(port) as sock:
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)  # the peer goes away mid-frame
            rest = _read_to_eof(sock)
        return "closed" if rest == b"" else f"unexpected {len(rest)} bytes after an abandoned frame"

    return probe


SOCKET_KINDS: dict[str, Callable[[int], str]] = {
    "bad magic": _socket_expect(b"GET / HTTP/1.1\r\n\r\n", "RpcProtocolError", "not an rpent frame"),
    "zero parts": _socket_expect(_frame_header(), "RpcProtocolError", "parts"),
    "over the limit (1 TiB)": _socket_expect(_frame_header(2**40), "RpcProtocolError", "exceeds the limit"),
    "255 MiB declared, 4 KiB sent": _socket_abandoned(_frame_header(255 * 2**20) + b"\x80" * 4096),
    "truncated header": _socket_abandoned(MAGIC + b"\x00"),
    "bad pickle": _socket_expect(_frame_header(9) + b"\x80\x05garbage", "RpcProtocolError", "does not unpickle"),
    "not a request tuple": _socket_expect(_raw_frame("hello"), "RpcProtocolError", "(method, args, kwargs)"),
    "args not a list": _socket_expect(_raw_frame(("echo", 5, {})), "RpcProtocolError", "args: must be"),
    "kwargs not a dict": _socket_expect(_raw_frame(("echo", (), [1])), "RpcProtocolError", "kwargs: must be"),
    "wrong arity": _socket_expect(_raw_frame(("echo", (1, 2, 3), {})), "TypeError", "too many positional"),
    "unknown method": _socket_expect(_raw_frame(("teleport", (), {})), "RpcMethodNotFound", "no rpc method"),
}


def _http_request(body: bytes, headers: dict[str, str] | None = None, length: int | None = None) -> bytes:
    # Connection: close, so the answer ends with the server closing; a client that half-closes
    # instead gets no answer from uvicorn (it takes EOF for a peer that is gone).
    fields = {"Host": "127.0.0.1", "Content-Type": "application/json", "Connection": "close", **(headers or {})}
    fields["Content-Length"] = str(len(body) if length is None else length)
    head = "POST /call HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return head.encode("latin-1") + body


def _http_expect(request: bytes, status: int, text: str) -> Callable[[int], str]:
    def probe(port: int) -> str:
        with _conn(port) as sock:
            sock.sendall(request)
            raw = _read_to_eof(sock)
        head, _, body = raw.partition(b"\r\n\r\n")
        try:
            got = int(head.split()[1])
            message = json.loads(body)["error"]["message"]
        except (IndexError, ValueError, KeyError, TypeError):
            return f"unexpected answer {raw[:120]!r}"
        if got == status and text in message and b"application/json" in head.lower():
            return "answered"
        return f"unexpected {got} {message[:120]!r}"

    return probe


def _http_abandoned(request: bytes) -> Callable[[int], str]:
    def probe(port: int) -> str:
        with _conn(port) as sock:
            sock.sendall(request)
            sock.shutdown(socket.SHUT_WR)
            rest = _read_to_eof(sock)
        return "closed" if rest == b"" else f"unexpected answer to an abandoned request {rest[:80]!r}"

    return probe


def _call(args: Any, kwargs: Any = None) -> bytes:
    body: dict[str, Any] = {"method": "echo", "args": args}
    if kwargs is not None:
        body["kwargs"] = kwargs
    return json.dumps(body).encode()


def _tag(payload: str, dtype: Any, shape: Any) -> dict[str, Any]:
    return {"__ndarray__": payload, "dtype": dtype, "shape": shape}


HTTP_KINDS: dict[str, Callable[[int], str]] = {
    "bad JSON": _http_expect(_http_request(b"{not json"), 400, "body: not valid JSON"),
    "array of 70 dims": _http_expect(
        _http_request(_call([_tag("", "<f8", [0] + [1] * 70)])), 400, "args[0].__ndarray__: shape"
    ),
    "U0 array of 1e11 items": _http_expect(
        _http_request(_call([], {"x": _tag("", "U0", [1e11])})), 400, "kwargs.x.__ndarray__: shape"
    ),
    "object array": _http_expect(_http_request(_call([_tag("", "O", [0])])), 400, "dtype 'O' is not allowed"),
    "dtype as an object": _http_expect(_http_request(_call([_tag("", {"a": 1}, [0])])), 400, "dtype must be a string"),
    "array bytes short": _http_expect(_http_request(_call([_tag("AAAA", "<f8", [2])])), 400, "holds 3 bytes"),
    "array not base64": _http_expect(_http_request(_call([_tag("@@@@", "u1", [3])])), 400, "not valid base64"),
    "args not a list": _http_expect(_http_request(_call(5)), 400, "args: must be"),
    "kwargs not a dict": _http_expect(_http_request(_call([1], [1])), 400, "kwargs: must be"),
    "no method": _http_expect(_http_request(b'{"args": []}'), 400, "method: must be a str"),
    "wrong arity": _http_expect(_http_request(_call([1, 2, 3])), 400, "too many positional"),
    "1 TiB declared": _http_expect(_http_request(b"", length=2**40), 413, "exceeds the limit"),
    "255 MiB declared, 4 KiB sent": _http_abandoned(_http_request(b" " * 4096, length=255 * 2**20)),
    "text/plain": _http_expect(_http_request(_call([1]), {"Content-Type": "text/plain"}), 415, "Content-Type"),
    "cross-site Origin": _http_expect(_http_request(_call([1]), {"Origin": "http://evil.example"}), 403, "Origin"),
    "foreign Host": _http_expect(_http_request(_call([1]), {"Host": "evil.example"}), 421, "Host"),
    "not HTTP": _http_expect(b"\x16\x03\x01\x00\xa5 hello\r\n\r\n", 400, "not an HTTP request"),
}


def malformed_storm(ports: dict[str, int], per_transport: int) -> dict[str, Any]:
    outcomes: dict[str, Counter[str]] = {"socket": Counter(), "http": Counter()}
    unexpected: list[str] = []
    started = time.monotonic()
    for protocol, kinds in (("socket", SOCKET_KINDS), ("http", HTTP_KINDS)):
        names = list(kinds)
        for i in range(per_transport):
            name = names[i % len(names)]
            try:
                outcome = kinds[name](ports[protocol])
            except Exception as exc:
                outcome = f"unexpected {type(exc).__name__}: {exc}"
            outcomes[protocol]["unexpected" if outcome.startswith("unexpected") else outcome] += 1
            if outcome.startswith("unexpected") and len(unexpected) < 10:
                unexpected.append(f"{protocol} {name}: {outcome}")
    return {
        "outcomes": {p: dict(c) for p, c in outcomes.items()},
        "unexpected": unexpected,
        "seconds": time.monotonic() - started,
    }


# -- stalled connections --------------------------------------------------------------------------
def _half_sent(protocol: str) -> bytes:
    if protocol == "socket":
        return _frame_header(200 * 2**20) + b"\x80" * 65536
    return _http_request(b" " * 65536, length=200 * 2**20)


def _classify_end(protocol: str, data: bytes) -> str:
    if not data:
        return "dropped idle"
    if protocol == "socket":
        text = data.decode("latin-1")
        if "RpcServerBusy" in text:
            return "refused"
        return "dropped stalled" if "stalled" in text else f"unexpected {data[:80]!r}"
    status = data.split()[1] if len(data.split()) > 1 else b""
    return {b"503": "refused", b"408": "dropped stalled"}.get(status, f"unexpected {data[:80]!r}")


def stalled_connections(ports: dict[str, int], count: int, pid: int, limits: ServerLimits) -> dict[str, Any]:
    held: list[tuple[str, str, socket.socket, float]] = []
    protocols = sorted(ports)
    for i in range(count):
        protocol = protocols[i % len(protocols)]
        mode = ("half-sent", "idle")[(i // 2) % 2]
        sock = _conn(ports[protocol], timeout_s=limits.idle_timeout_s + limits.read_timeout_s + 10)
        if mode == "half-sent":
            try:
                sock.sendall(_half_sent(protocol))
            except OSError:
                pass  # refused and closed before the request was sent: the answer is still there
        held.append((protocol, mode, sock, time.monotonic()))
    rss_held = rss_mb(pid)
    ends: Counter[str] = Counter()
    by_mode: Counter[str] = Counter()
    longest = 0.0
    for protocol, mode, sock, opened in held:
        with sock:
            try:
                data = _read_to_eof(sock)
                end = _classify_end(protocol, data)
            except TimeoutError:
                end = "still open (not dropped)"
        longest = max(longest, time.monotonic() - opened)
        ends["unexpected" if end.startswith("unexpected") else end] += 1
        by_mode[f"{protocol} {mode}: {end}"] += 1
    return {"ends": dict(ends), "by_mode": dict(by_mode), "rss_while_held_mb": rss_held, "longest_s": longest}


def normal_calls_work(endpoints: dict[str, str]) -> bool:
    value = {"q": np.arange(7, dtype=np.float64), "image": np.full((64, 64, 3), 7, np.uint8)}
    for endpoint in endpoints.values():
        with RpcClient(endpoint, timeout_s=10) as client:
            got = client.call("echo", [value])
            if not (np.array_equal(got["q"], value["q"]) and np.array_equal(got["image"], value["image"])):
                return False
    return True


# -- tool calls against a live MCP tool server (the step log must keep one line per call) ---------
# Values JSON cannot carry (NaN, lone surrogates) are left out: the SDK client refuses to encode
# them and its session fails, so they never reach a server this way.
NASTY: list[Callable[[random.Random], Any]] = [
    lambda r: None,
    lambda r: True,
    lambda r: -1,
    lambda r: 1e308,
    lambda r: -(2**70),
    lambda r: "",
    lambda r: "x" * r.choice((70_000, 200_000)),
    lambda r: "../../../etc/passwd",
    lambda r: "/etc/passwd",
    lambda r: "nul\x00byte",
    lambda r: [[[[[[[[[[[1]]]]]]]]]]],
    lambda r: {"nested": {"deeper": [1, {"x": "y"}]}},
    lambda r: r.random() * 1e6,
    lambda r: "é" * 40_000,
]


def _valid(schema: dict[str, Any], name: str, r: random.Random, index: int) -> Any:
    if "enum" in schema:
        return r.choice(schema["enum"])
    if "anyOf" in schema:
        return _valid(r.choice(schema["anyOf"]), name, r, index)
    kind = schema.get("type")
    if kind in ("number", "integer"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        high = schema.get("maximum", schema.get("exclusiveMaximum", low + 1))
        value = low + (high - low) * r.uniform(0.01, 0.1)  # near the low end: short moves and waits
        return int(value) if kind == "integer" else value
    if kind == "string":
        if "path" in name:
            return f"soak/note-{index % 50}.md"
        return f"soak text {index}"[: schema.get("maxLength", 100)]
    if kind == "boolean":
        return r.random() < 0.5
    if kind == "array":
        return []
    return {}


def fuzz_arguments(schema: dict[str, Any], r: random.Random, index: int) -> dict[str, Any]:
    props: dict[str, Any] = schema.get("properties", {})
    args: dict[str, Any] = {}
    for name, prop in props.items():
        roll = r.random()
        if roll < 0.15:
            continue  # leave it out (required or not)
        args[name] = _valid(prop, name, r, index) if roll < 0.7 else r.choice(NASTY)(r)
    if r.random() < 0.1:
        args[r.choice(("extra", "__proto__", "ctx", "x_m ", ""))] = r.choice(NASTY)(r)
    return args


async def _drive(url: str, calls: int, seed: int, workers: int) -> dict[str, Any]:
    import mcp

    tally: Counter[str] = Counter()
    failures: list[str] = []
    async with mcp.Client(url, read_timeout_seconds=120) as client:
        tools = {t.name: dict(t.input_schema or {}) for t in (await client.list_tools()).tools}
        names = [*sorted(tools), "no_such_tool"]
        plan = []
        r = random.Random(seed)
        for index in range(calls):
            name = r.choice(names)
            plan.append((name, fuzz_arguments(tools.get(name, {}), r, index)))
        queue = iter(plan)

        async def worker() -> None:
            for name, args in queue:
                try:
                    result = await client.call_tool(name, args)
                except Exception as exc:  # the client could not send it, or the server broke the protocol
                    tally["client or protocol error"] += 1
                    if len(failures) < 5:
                        failures.append(f"{name}: {type(exc).__name__}: {str(exc)[:160]}")
                    continue
                if name not in tools:
                    tally["unknown tool (answered by the bridge)"] += 1
                else:
                    tally["tool error" if result.is_error else "tool ok"] += 1

        await asyncio.gather(*(worker() for _ in range(workers)))
    return {"tally": dict(tally), "failures": failures}


def fuzzed_tool_calls(calls: int, workdir: Path, seed: int = 13, workers: int = 4) -> dict[str, Any]:
    """Serve the toy robot over MCP (streamable HTTP), send fuzzed calls, count steps.jsonl lines."""
    out = workdir / "mcp-record"
    env = {**os.environ, "RPENT_MEMORY_DIR": str(workdir / "memory"), "PYTHONUNBUFFERED": "1"}
    command = [
        sys.executable,
        "-m",
        "rpent",
        "serve-mcp",
        "--robot",
        "toy",
        "--http",
        "--port",
        "0",
        "--output-dir",
        str(out),
        "--speed",
        "2",
        "--memory-access",
        "read-write",
    ]
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
    )
    lines: list[str] = []
    found = threading.Event()
    url: list[str] = []

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            match = re.search(r"MCP server listening on (http://127\.0\.0\.1:\d+/mcp)", line)
            if match:
                url.append(match.group(1))
                found.set()

    threading.Thread(target=read_stderr, daemon=True).start()
    started = time.monotonic()
    try:
        if not found.wait(60):
            raise RuntimeError("the MCP server did not start:\n" + "".join(lines[-20:]))
        rss_before = rss_mb(proc.pid)
        driven = asyncio.run(_drive(url[0], calls, seed, workers))
        rss_after = rss_mb(proc.pid)
        proc.send_signal(signal.SIGTERM)  # the record is saved on the way out
        code = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    steps = out / "steps.jsonl"
    written = [ln for ln in steps.read_text(encoding="utf-8").splitlines() if ln.strip()] if steps.exists() else []
    strict = sum(1 for ln in written if _strict_json(ln))
    tally = driven["tally"]
    reached = tally.get("tool ok", 0) + tally.get("tool error", 0)
    return {
        "calls": calls,
        "tally": tally,
        "failures": driven["failures"],
        "reached_toolkit": reached,
        "step_lines": len(written),
        "strict_json_lines": strict,
        "lost_step_lines": reached - len(written),
        "server_exit_code": code,
        "rss_before_mb": rss_before,
        "rss_after_mb": rss_after,
        "seconds": time.monotonic() - started,
    }


def _strict_json(line: str) -> bool:
    def refuse(token: str) -> None:
        raise ValueError(token)

    try:
        json.loads(line, parse_constant=refuse)
        return True
    except ValueError:
        return False


# -- the soak ---------------------------------------------------------------------------------------
def run_soak(
    frames: int = 2000,
    stalled: int = 200,
    tool_calls: int = 10_000,
    read_timeout_s: float = 1.0,
    idle_timeout_s: float = 2.0,
    rounds: int = 1,
    max_connections: int = ServerLimits.max_connections,
) -> dict[str, Any]:
    limits = ServerLimits(read_timeout_s=read_timeout_s, idle_timeout_s=idle_timeout_s, max_connections=max_connections)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--read-timeout-s",
        str(read_timeout_s),
        "--idle-timeout-s",
        str(idle_timeout_s),
        "--max-connections",
        str(max_connections),
    ]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    report: dict[str, Any] = {"limits": limits.__dict__.copy()}
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        if not line.startswith(READY):
            raise RuntimeError(f"soak child did not start: {line!r}")
        ready = json.loads(line[len(READY) :])
        pid = ready.pop("pid")
        ports = {p: int(ep.rsplit(":", 1)[1]) for p, ep in ready.items()}
        for _ in range(20):  # warm-up: allocator pools and lazily imported code exist before the baseline
            normal_calls_work(ready)
        with RpcClient(ready["socket"]) as client:
            client.call("echo", [np.zeros(4 * 2**20, np.uint8)])
        report["rss_before_mb"] = rss_mb(pid)
        report["rss_after_round_mb"] = []
        for _ in range(rounds):
            report["malformed"] = malformed_storm(ports, frames)
            report["rss_after_malformed_mb"] = rss_mb(pid)
            report["stalled"] = stalled_connections(ports, stalled, pid, limits)
            report["rss_after_round_mb"].append(rss_mb(pid))
        report["normal_call_after"] = normal_calls_work(ready)
        with RpcClient(ready["socket"]) as client:
            report["server_counters"] = client.call("counters")
        report["rss_after_mb"] = rss_mb(pid)
        report["rss_growth_mb"] = report["rss_after_mb"] - report["rss_before_mb"]
    finally:
        if child.stdin is not None:
            child.stdin.close()
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(10)
    if tool_calls:
        with tempfile.TemporaryDirectory(prefix="rpent-soak-") as workdir:
            report["tool_calls"] = fuzzed_tool_calls(tool_calls, Path(workdir))
    return report


def print_report(report: dict[str, Any]) -> None:
    print("RPC servers (socket + http in one process), limits:", report["limits"])
    print(
        f"  RSS before {report['rss_before_mb']:.1f} MB, after the malformed storm "
        f"{report['rss_after_malformed_mb']:.1f} MB, while {sum(report['stalled']['ends'].values())} "
        f"connections were held {report['stalled']['rss_while_held_mb']:.1f} MB, after "
        f"{report['rss_after_mb']:.1f} MB (growth {report['rss_growth_mb']:+.1f} MB, aim < {RSS_GROWTH_AIM_MB:g})"
    )
    if len(report["rss_after_round_mb"]) > 1:
        print("  RSS after each round:", ", ".join(f"{mb:.1f}" for mb in report["rss_after_round_mb"]), "MB")
    malformed = report["malformed"]
    print(f"  malformed requests ({malformed['seconds']:.1f} s): {malformed['outcomes']}")
    for line in malformed["unexpected"]:
        print("    UNEXPECTED", line)
    stalled = report["stalled"]
    print(f"  stalled connections: {stalled['ends']} (all ended within {stalled['longest_s']:.1f} s)")
    for key, n in sorted(stalled["by_mode"].items()):
        print(f"    {key}: {n}")
    print(f"  server counters: {report['server_counters']}")
    print(f"  a normal call works afterwards: {report['normal_call_after']}")
    tools = report.get("tool_calls")
    if tools:
        print(
            f"MCP tool server (toy robot), {tools['calls']} fuzzed calls in {tools['seconds']:.0f} s: {tools['tally']}"
        )
        for line in tools["failures"]:
            print("    client/protocol error:", line)
        print(
            f"  reached the toolkit {tools['reached_toolkit']}, steps.jsonl lines {tools['step_lines']} "
            f"({tools['strict_json_lines']} strict JSON), lost step lines {tools['lost_step_lines']}"
        )
        print(
            f"  RSS {tools['rss_before_mb']:.1f} -> {tools['rss_after_mb']:.1f} MB, exit code {tools['server_exit_code']}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=2000, help="malformed requests per transport")
    parser.add_argument("--stalled", type=int, default=200, help="stalled connections held at once")
    parser.add_argument("--tool-calls", type=int, default=10_000, help="fuzzed MCP tool calls (0: skip)")
    parser.add_argument("--read-timeout-s", type=float, default=1.0)
    parser.add_argument("--idle-timeout-s", type=float, default=2.0)
    parser.add_argument("--max-connections", type=int, default=ServerLimits.max_connections, help="per server")
    parser.add_argument("--rounds", type=int, default=1, help="repeat the malformed and stalled phases (RSS per round)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        serve_child(
            ServerLimits(
                read_timeout_s=args.read_timeout_s,
                idle_timeout_s=args.idle_timeout_s,
                max_connections=args.max_connections,
            )
        )
        return 0
    report = run_soak(
        args.frames,
        args.stalled,
        args.tool_calls,
        args.read_timeout_s,
        args.idle_timeout_s,
        args.rounds,
        args.max_connections,
    )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
