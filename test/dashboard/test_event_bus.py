"""The event bus and the event stream: ordering, resume after Last-Event-ID, slow readers."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest
from dashboard_support import Served

from rpent.dashboard.bus import EventBus

pytestmark = pytest.mark.timeout(60)


def test_event_ids_start_at_one_and_increase_in_publish_order() -> None:
    bus = EventBus(capacity=10)
    ids = [bus.publish("tick", {"n": n}) for n in range(5)]
    read = bus.read(0)
    assert ids == [1, 2, 3, 4, 5]
    assert [e.id for e in read.events] == ids and not read.gap and read.cursor == 5
    assert [e.data for e in read.events][2] == '{"n": 2}'


def test_reader_behind_the_ring_is_told_about_the_gap_and_gets_what_is_left() -> None:
    bus = EventBus(capacity=3)
    for n in range(6):
        bus.publish("tick", {"n": n})
    read = bus.read(1)
    assert read.gap and [e.id for e in read.events] == [4, 5, 6]
    assert not bus.read(3).gap  # event 4 is the next one and is still held


def test_publishers_from_many_threads_get_unique_increasing_ids() -> None:
    bus = EventBus(capacity=10_000)
    got: list[list[int]] = [[] for _ in range(4)]

    def publish(slot: int) -> None:
        got[slot] = [bus.publish("tick", {"slot": slot}) for _ in range(500)]

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    all_ids = sorted(i for ids in got for i in ids)
    assert all_ids == list(range(1, 2001))
    assert all(ids == sorted(ids) for ids in got)
    assert [e.id for e in bus.read(0, limit=5000).events] == all_ids


def read_sse(served: Served, *, after: int | None = None, last_event_id: int | None = None,
             stop_after: int) -> list[tuple[int | None, str, str]]:
    """Read events (id, kind, data) from /api/events until `stop_after` events with an id arrived."""
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    params = {"after": after} if after is not None else {}
    events: list[tuple[int | None, str, str]] = []
    current: dict[str, str] = {}
    with served.client.stream("GET", "/api/events", params=params, headers=headers) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line == "":
                if "event" in current:
                    events.append((int(current["id"]) if "id" in current else None, current["event"], current.get("data", "")))
                current = {}
                if sum(1 for e in events if e[0] is not None) >= stop_after:
                    return events
                continue
            if line.startswith(":"):
                continue
            key, _, value = line.partition(": ")
            current[key] = value
    return events


def test_stream_delivers_events_in_id_order_and_resumes_after_last_event_id(served_factory) -> None:
    served = served_factory()
    for n in range(20):
        served.session.sink.publish("operator_note_test", {"n": n})
    first = [e for e in read_sse(served, after=0, stop_after=10) if e[0] is not None]
    ids = [e[0] for e in first]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) and ids[0] == 1
    resume_from = ids[-1]
    resumed = [e for e in read_sse(served, last_event_id=resume_from, stop_after=5) if e[0] is not None]
    assert [e[0] for e in resumed] == list(range(resume_from + 1, resume_from + 6))
    # Last-Event-ID (what a reconnecting browser sends) wins over the page's initial ?after=.
    again = [e for e in read_sse(served, after=0, last_event_id=resume_from, stop_after=1) if e[0] is not None]
    assert again[0][0] == resume_from + 1


def test_a_stalled_client_neither_blocks_publishers_nor_loses_track(served_factory, tmp_path: Path) -> None:
    served = served_factory(bus_capacity=256)
    bus = served.session.bus
    # A client that opens the stream and never reads: its socket buffers fill up.
    stalled = socket.socket()
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stalled.connect(("127.0.0.1", served.server.port))
    stalled.sendall(b"GET /api/events?after=0 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    try:
        stalled.settimeout(10)
        head = b""
        while b"retry:" not in head:  # the stream has started (it subscribes before its first line)
            chunk = stalled.recv(4096)
            assert chunk, "the server closed the event stream"
            head += chunk
        # Far more than the socket buffers on both sides hold (~20 MB), so the stream must fall behind.
        big = "x" * 4000
        count = 5000
        finished = threading.Event()

        def publish_a_lot() -> None:
            for n in range(count):
                served.session.sink.publish("bulk", {"n": n, "pad": big})
            finished.set()

        threading.Thread(target=publish_a_lot, daemon=True).start()
        assert finished.wait(30), "publishing stalled behind a client that does not read"
        # A fresh client still gets the newest events at once.
        latest = bus.last_id
        fresh = [e for e in read_sse(served, after=latest - 2, stop_after=2) if e[0] is not None]
        assert [e[0] for e in fresh] == [latest - 1, latest]
        # The stalled client, once it reads, is told to reload the snapshot instead of getting a hole.
        received = b""
        while b"event: resync" not in received:
            chunk = stalled.recv(65536)
            assert chunk, "the server closed the stalled stream without a resync"
            received += chunk
    finally:
        stalled.close()
