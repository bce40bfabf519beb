"""One Ctrl-C, one clean exit.

Ctrl-C on `ros2 launch` reaches every node twice: the terminal signals the whole foreground process
group, and launch forwards SIGINT to each node again. The second one must not interrupt a node that
is stopping its arm or saving its record, so nodes ignore SIGINT once their shutdown has begun.
launch still escalates to SIGTERM (5 s after SIGINT) and SIGKILL if a node hangs; a SIGTERM during the
shutdown first writes every thread's Python stack to stderr (the launch's log), so the log shows where
the hang waits.
"""

from __future__ import annotations

import faulthandler
import signal
import threading


def shield_shutdown() -> None:
    """Ignore further SIGINTs from now on, and dump every thread's stack on a SIGTERM (main thread only;
    elsewhere it does nothing)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        # At C level, so it works while the main thread waits in a join or a lock; the Python handler
        # (KeyboardInterrupt) still runs after it.
        faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
