"""The openpi client's watchdog, which cuts a send that a server stopped reading: its thread sleeps towards
the deadline it knows and is woken only for an earlier one, so a run of quick inferences costs no thread
switch each. The deadline of the call that blocks must still fire, on time and not before."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rpent.rpc.transport.vla_openpi import _Watchdog


@contextmanager
def watchdog_calling(on_expiry: Callable[[], object]) -> Iterator[_Watchdog]:
    watchdog = _Watchdog(on_expiry)
    try:
        yield watchdog
    finally:
        watchdog.close()


def test_a_deadline_armed_after_quick_calls_fires_at_its_own_time():
    fired_at: list[float] = []
    expired = threading.Event()
    with watchdog_calling(lambda: (fired_at.append(time.monotonic()), expired.set())) as watchdog:
        for _ in range(3):  # quick calls: armed, answered, disarmed; the thread sleeps towards the first deadline
            watchdog.arm(time.monotonic() + 0.2)
            watchdog.disarm()
        deadline = time.monotonic() + 0.5  # the call that blocks: later than the deadline the thread sleeps towards
        watchdog.arm(deadline)
        assert expired.wait(10), "the blocked call's deadline never fired"
        assert fired_at[0] >= deadline
        assert len(fired_at) == 1


def test_an_earlier_deadline_wakes_the_thread():
    expired = threading.Event()
    with watchdog_calling(expired.set) as watchdog:
        watchdog.arm(time.monotonic() + 3600)
        watchdog.disarm()
        deadline = time.monotonic() + 0.2  # a call with a shorter timeout than the one the thread sleeps towards
        watchdog.arm(deadline)
        assert expired.wait(60), "the earlier deadline did not wake the watchdog"
        assert time.monotonic() >= deadline


def test_a_disarmed_deadline_never_fires():
    expired = threading.Event()
    with watchdog_calling(expired.set) as watchdog:
        watchdog.arm(time.monotonic() + 0.1)
        watchdog.disarm()
        assert not expired.wait(0.5)
