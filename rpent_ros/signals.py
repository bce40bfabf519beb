"""One Ctrl-C, one clean exit.

Ctrl-C on `ros2 launch` reaches every node twice: the terminal signals the whole foreground process
group, and launch forwards SIGINT to each node again. The second one must not interrupt a node that
is stopping its arm or saving its record, so nodes ignore SIGINT once their shutdown has begun.
launch still escalates to SIGTERM and SIGKILL if a node hangs.
"""

from __future__ import annotations

import signal
import threading


def shield_shutdown() -> None:
    """Ignore further SIGINTs from now on (main thread only; elsewhere it does nothing)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
