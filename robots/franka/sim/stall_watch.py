"""A simulation that stops stepping says where it waits.

Every arm and gripper client of franky-sim gets its states from the stepping thread; libfranka gives
up on a robot whose states stop for 1 s (`libfranka: UDP receive: Timeout`) and franky's client is
lost for good. A stepping thread held up that long (a wait, a lock, a call that keeps the GIL) took
every client of a launch down at once, with nothing in the simulator's log to say why (the busy-loop
launch runs of issue 31). This watch runs beside the stepping thread: when no step came for
`after_s` of the wall clock, it logs where the stepping thread is (its Python stack) and what the
simulator knows of its clients, and once more when the steps come again.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from collections.abc import Callable

log = logging.getLogger(__name__)

#: A stall worth a line: far above a step on a loaded machine (milliseconds), well below libfranka's 1 s.
STALL_S = 0.25


class StallWatch:
    """Watches `steps()`, a count the stepping thread `stepper` raises with each step, while that thread lives
    (one that failed has said so itself) and until `close()`."""

    def __init__(self, stepper: threading.Thread, steps: Callable[[], int], describe: Callable[[], str],
                 after_s: float = STALL_S) -> None:
        self._stepper = stepper
        self._steps = steps
        self._describe = describe
        self._after_s = after_s
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="franky-sim-stall-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        seen, since, stalled = self._steps(), time.monotonic(), False
        while not self._closed.wait(self._after_s / 2) and self._stepper.is_alive():
            count, now = self._steps(), time.monotonic()
            if count != seen:
                if stalled:
                    log.warning("franky-sim stepped again after %.2f s without a step", now - since)
                seen, since, stalled = count, now, False
            elif not stalled and now - since >= self._after_s:
                stalled = True
                log.warning("franky-sim has not stepped for %.2f s (its clients give up after 1 s: libfranka: UDP "
                            "receive: Timeout); %s; the stepping thread is at:\n%s",
                            now - since, self._describe(), self._stack())

    def _stack(self) -> str:
        frame = sys._current_frames().get(self._stepper.ident)  # the one way to read another thread's stack
        return "".join(traceback.format_stack(frame)) if frame is not None else "(the stepping thread has ended)"

    def close(self) -> None:
        self._closed.set()
        if self._thread is not threading.current_thread():
            self._thread.join(5.0)
