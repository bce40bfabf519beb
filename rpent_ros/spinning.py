"""An executor spinning in a background thread, so the main thread can serve HTTP, plan or wait for a signal."""

from __future__ import annotations

import threading

from rclpy.executors import Executor


class BackgroundSpin:
    """Spins `executor` in a daemon thread; `stop()` shuts it down and joins the thread.

    The join matters: a thread still inside rclpy's wait when the interpreter exits aborts the
    process ("terminate called without an active exception", exit code 134).
    """

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.thread = threading.Thread(target=executor.spin, name="rpent-executor", daemon=True)
        self.thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self.executor.shutdown()
        self.thread.join(timeout_s)
