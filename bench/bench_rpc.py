"""RPC round-trip benchmark: http and socket transports against a raw TCP echo floor.

Run: ``python bench/bench_rpc.py [--rounds 40]`` from the repository root.

A child process (started with rpent.rpc.facades.supervisor.ServerProcess) hosts an echo facade on
both transports and a raw loopback TCP echo server. For each payload the parent sends the
observation and gets the same observation back; the floor moves the same array bytes (one
length-prefixed message each way, fresh receive buffers, no encoding). Rounds interleave the
three so load from other processes hits them alike. Targets: socket <= 1.5x floor,
http <= 4x floor (median round-trip time).
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rpent.rpc import RpcClient, RpcFacade, main, serve
from rpent.rpc.facades.supervisor import ServerProcess
from rpent.rpc.transport.endpoint import Endpoint

_LEN = struct.Struct("!Q")


# -- child side --------------------------------------------------------------------------------
def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise EOFError
        got += k
    return buf


def _tcp_echo_connection(conn: socket.socket) -> None:
    with conn:
        while True:
            try:
                (n,) = _LEN.unpack(_recv_exact(conn, _LEN.size))
                data = _recv_exact(conn, n)
            except (EOFError, OSError):
                return
            conn.sendall(_LEN.pack(n))
            conn.sendall(data)


def _tcp_echo_server() -> int:
    listener = socket.create_server(("127.0.0.1", 0))

    def accept_loop() -> None:
        while True:
            conn, _ = listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=_tcp_echo_connection, args=(conn,), daemon=True).start()

    threading.Thread(target=accept_loop, daemon=True).start()
    return listener.getsockname()[1]


class BenchFacade(RpcFacade):
    """Echo over rpc, plus the ports of the sibling servers living in this process."""

    def __init__(self) -> None:
        super().__init__()
        self._register_rpc("echo", lambda obs: obs)
        self._http = serve(self, "http://127.0.0.1:0")
        self._tcp_port = _tcp_echo_server()
        self._register_rpc("ports", lambda: {"http": self._http.endpoint.port, "tcp": self._tcp_port}, locked=False)

    def close(self) -> None:
        self._http.stop()


# -- parent side -------------------------------------------------------------------------------
def libero_observation(history: int, rng: np.random.Generator) -> dict[str, Any]:
    def image(*lead: int) -> np.ndarray:
        return rng.integers(0, 256, size=(*lead, 256, 256, 3), dtype=np.uint8)

    obs: dict[str, Any] = {
        "agentview_image": image(),
        "robot0_eye_in_hand_image": image(),
        "robot0_eef_pos": rng.standard_normal(3),
        "robot0_eef_quat": rng.standard_normal(4),
        "robot0_gripper_qpos": rng.standard_normal(2),
        "robot0_joint_pos": rng.standard_normal(7).astype(np.float32),
    }
    if history:
        obs["history"] = {
            "agentview_image": image(history),
            "robot0_eye_in_hand_image": image(history),
            "state": rng.standard_normal((history, 9)).astype(np.float32),
        }
    return obs


def array_bytes(obj: Any) -> bytes:
    if isinstance(obj, np.ndarray):
        return obj.tobytes()
    if isinstance(obj, dict):
        return b"".join(array_bytes(v) for v in obj.values())
    return b""


def tcp_echo(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_LEN.pack(len(data)))
    sock.sendall(data)
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    _recv_exact(sock, n)


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(rounds: int) -> None:
    server = ServerProcess(str(Path(__file__).resolve()), "socket://127.0.0.1:0", args=["--serve"])
    server.start()
    assert server.endpoint is not None
    try:
        with RpcClient(server.endpoint) as sock_client:
            ports = sock_client.call("ports")
            http_ep = Endpoint("http", "127.0.0.1", ports["http"])
            with RpcClient(http_ep) as http_client, socket.create_connection(("127.0.0.1", ports["tcp"])) as tcp:
                tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                rng = np.random.default_rng(0)
                print(f"rpc round trip, {rounds} interleaved rounds, server pid {server.pid}; median (p90) ms")
                print(f"{'payload':<34}{'transport':<10}{'rtt ms':>16}{'MB/s':>9}{'x floor':>9}")
                for label, history in (("LIBERO step (2 images + proprio)", 0), ("  + 10-frame history stack", 10)):
                    obs = libero_observation(history, rng)
                    raw = array_bytes(obs)
                    echoed = sock_client.call("echo", [obs])
                    assert np.array_equal(echoed["agentview_image"], obs["agentview_image"])
                    assert np.array_equal(http_client.call("echo", [obs])["agentview_image"], obs["agentview_image"])
                    cases = {
                        "tcp floor": lambda raw=raw: tcp_echo(tcp, raw),
                        "socket": lambda obs=obs: sock_client.call("echo", [obs]),
                        "http": lambda obs=obs: http_client.call("echo", [obs]),
                    }
                    times: dict[str, list[float]] = {name: [] for name in cases}
                    for _ in range(3):  # warm-up
                        for fn in cases.values():
                            fn()
                    for _ in range(rounds):
                        for name, fn in cases.items():
                            times[name].append(timed(fn))
                    floor = float(np.median(times["tcp floor"]))
                    mb = len(raw) / 1e6
                    for name, samples in times.items():
                        med = float(np.median(samples))
                        p90 = float(np.percentile(samples, 90))
                        text = f"{med * 1e3:7.2f} ({p90 * 1e3:6.2f})"
                        print(f"{label:<34}{name:<10}{text:>16}{2 * mb / med:>9.0f}{med / floor:>8.2f}x")
                        label = ""
                    print(f"{'':<34}payload {mb:.2f} MB of arrays each way")
    finally:
        server.stop()


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_known_args(argv)


if __name__ == "__main__":
    known, rest = parse_args()
    if known.serve:
        raise SystemExit(main(rest, lambda _args: BenchFacade()))
    run(known.rounds)
