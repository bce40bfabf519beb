"""An executor spinning in a background thread, so the main thread can serve HTTP, plan or wait for a signal."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import rclpy
from rclpy.executors import Executor, MultiThreadedExecutor
from rclpy.node import Node

from rpent_ros.security.keystore import check_node_security


class BackgroundSpin:
    """Spins `executor` in a daemon thread; `stop()` ends it in order and joins the thread.

    The join matters: a thread still inside rclpy's wait when the interpreter exits aborts the
    process ("terminate called without an active exception", exit code 134).

    The order matters too. rclpy 7.1's Executor.shutdown() (Jazzy) marks itself shut down before it
    would wait for running callbacks, so it never waits, and MultiThreadedExecutor leaves its thread
    pool running: callbacks still queued there start after their executor destroyed the guard
    condition each one triggers first ("cannot use Destroyable because destruction was requested").
    So `stop()` stops dispatching, lets the pool run dry, and only then shuts the executor down.
    """

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self._stopping = threading.Event()
        self.thread = threading.Thread(target=self._spin, name="rpent-executor", daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while not self._stopping.is_set() and self.executor.context.ok():
            self.executor.spin_once(timeout_sec=0.1)

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stopping.set()
        self.executor.wake()
        self.thread.join(timeout_s)
        # MultiThreadedExecutor's pool (no public handle in rclpy 7.1): wait for what it still runs.
        pool = getattr(self.executor, "_executor", None)
        if isinstance(pool, ThreadPoolExecutor) and not self.thread.is_alive():
            pool.shutdown(wait=True)
        self.executor.shutdown()


@contextmanager
def spinning_node(name: str, num_threads: int = 4) -> Iterator[Node]:
    """rclpy started and one plain node `name` spun in the background, for a client process that only calls
    out (a load driver, a benchmark); on exit the spin stops before the node goes, then rclpy shuts down.
    With ROS_SECURITY_ENABLE=true its keystore and enclave (`--ros-args --enclave` of sys.argv) are
    checked first: SecurityConfigError names the file that is missing or expired."""
    check_node_security(sys.argv)
    rclpy.init()
    node = Node(name)
    executor = MultiThreadedExecutor(num_threads=num_threads)
    executor.add_node(node)
    spinning = BackgroundSpin(executor)
    try:
        yield node
    finally:
        spinning.stop()
        node.destroy_node()
        rclpy.try_shutdown()
