"""What publishing to the dashboard costs the robot thread, with and without stalled browsers.

Prints microseconds per `DashboardSink.publish` of a tool_finished-sized event with no readers
(the floor, measured in the same run), with 8 live SSE readers, and with 8 more readers that never read
their sockets, each as a ratio to the floor. A stalled reader must not make publishing slower than
live ones do (target: stalled ratio <= live ratio * 1.5).

    python bench/bench_dashboard.py [--events 5000]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import httpx

from rpent.dashboard.bus import EventBus
from rpent.dashboard.cli import DashboardServer
from rpent.dashboard.state import DashboardSink, DashboardState

PAYLOAD = {"call_id": 1, "tool": "move_to", "arguments": {"x_m": 0.1, "y_m": 0.45, "z_m": 0.1},
           "duration_s": 1.2, "error": None, "result": {"gripper_xyz_m": [0.1, 0.45, 0.1], "pad": "x" * 1500},
           "images": [], "clip": None}


class _Session:
    """The parts of a DashboardSession the app reads, around a bare sink (no robot needed)."""

    def __init__(self) -> None:
        self.bus = EventBus(4096)
        self.sink = DashboardSink(self.bus, DashboardState("bench", []))
        self.interaction = self.sink.interaction
        self.frames = SimpleNamespace(counters=dict, latest=lambda channel: None)
        self.args = SimpleNamespace(planner="replay")
        self.spec = SimpleNamespace(name="bench")
        self.dashboard = SimpleNamespace(task_command="", task_fields=(), components=(), frame_channels=())
        self.output_root = Path(".")

    def snapshot(self) -> dict:
        return self.sink.snapshot()


def per_event_us(sink: DashboardSink, events: int) -> float:
    t0 = time.perf_counter()
    for n in range(events):
        sink.publish("tool_finished", {**PAYLOAD, "call_id": n})
    return (time.perf_counter() - t0) / events * 1e6


def live_reader(port: int, stop: threading.Event) -> None:
    with httpx.Client(timeout=30) as client, client.stream("GET", f"http://127.0.0.1:{port}/api/events") as response:
        for _ in response.iter_bytes():
            if stop.is_set():
                return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()

    session = _Session()
    server = DashboardServer(session, host="127.0.0.1", port=0).start()  # type: ignore[arg-type]
    try:
        floor = statistics.median(per_event_us(session.sink, options.events) for _ in range(options.repeats))

        stop = threading.Event()
        readers = [threading.Thread(target=live_reader, args=(server.port, stop), daemon=True) for _ in range(8)]
        for reader in readers:
            reader.start()
        deadline = time.monotonic() + 30
        while session.bus.subscribers < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        live = statistics.median(per_event_us(session.sink, options.events) for _ in range(options.repeats))

        stalled = []
        for _ in range(8):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            stalled.append(sock)
        deadline = time.monotonic() + 30
        while session.bus.subscribers < 16 and time.monotonic() < deadline:
            time.sleep(0.01)
        blocked = statistics.median(per_event_us(session.sink, options.events) for _ in range(options.repeats))
        stop.set()
        for sock in stalled:
            sock.close()
    finally:
        server.stop()

    print(f"publish, no readers (floor):   {floor:8.1f} us/event")
    print(f"publish, 8 live SSE readers:   {live:8.1f} us/event  ({live / floor:.2f}x floor)")
    print(f"publish, +8 stalled readers:   {blocked:8.1f} us/event  ({blocked / floor:.2f}x floor)")


if __name__ == "__main__":
    main()
