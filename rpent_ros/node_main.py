"""How an rpent node process starts and ends: one Ctrl-C, one clean exit, in a fixed order.

rclpy's own signal handler shuts the context down the moment SIGINT arrives, while executor
threads are still between two waits and timers are still publishing; they then fail with
`RCLError: failed to initialize wait set: the given context is not valid` or `publisher's context
is invalid`, and a node can exit 1 on a plain Ctrl-C. So rclpy's handler is off here: SIGINT and
SIGTERM only tell the main thread to stop, the node stops its motion and closes what it owns while
the executor still spins, then the executor stops, the node is destroyed, and the context is shut
down last, when nothing uses it any more.
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import rclpy
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from rpent_ros.logging_bridge import forward_python_logging
from rpent_ros.security.keystore import SecurityConfigError, check_node_security
from rpent_ros.signals import shield_shutdown
from rpent_ros.spinning import BackgroundSpin

# Exit status of a node refused at start for a bad parameter (as `rpent run` exits for a bad flag).
CONFIG_EXIT = 2


def check_security(args: list[str] | None) -> None:
    """Before rclpy.init: with ROS_SECURITY_ENABLE=true, a keystore, enclave or certificate that cannot
    be used stops the node with one line naming the file, and exit 2 (rcl would fail deep in a traceback)."""
    try:
        check_node_security(sys.argv if args is None else args)
    except SecurityConfigError as exc:
        print(f"{Path(sys.argv[0]).name}: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(CONFIG_EXIT) from None


def init(args: list[str] | None) -> None:
    """rclpy.init without rclpy's signal handlers; SIGINT and SIGTERM (launch's second step) raise
    KeyboardInterrupt in the main thread until `wait_for_signal` or a shutdown takes them over."""
    check_security(args)
    # A crash inside an extension (MuJoCo, EGL, DDS) kills the process with SIGSEGV and no word of
    # where: the Python stack of every thread goes to stderr (the launch's log) first.
    faulthandler.enable()
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    forward_python_logging()
    if threading.current_thread() is threading.main_thread():
        # Also SIGINT: a process started in the background of a script inherits it as ignored.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.default_int_handler)


def refuse_start(program: str, exc: ValueError) -> NoReturn:
    """A parameter broke a rule: say which and why, without a traceback, and exit 2."""
    print(f"{program}: {exc}", file=sys.stderr, flush=True)
    rclpy.try_shutdown()
    raise SystemExit(CONFIG_EXIT)


def build(program: str, factory: Callable[[], Any]) -> Any:
    """The node, or exit 2 naming the parameter that is wrong (ValueError: ConfigError, UrdfError, ...).

    Ctrl-C while it starts (a launch whose other node died at once) ends it with 0: nothing runs yet.
    That includes a Ctrl-C inside an extension module's import, which arrives as an ImportError
    caused by the KeyboardInterrupt (`import mujoco`: "initialization failed").
    """
    try:
        return factory()
    except ValueError as exc:
        refuse_start(program, exc)
    except ImportError as exc:
        if not isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
            raise
        _stopped_while_starting()
    except KeyboardInterrupt:
        _stopped_while_starting()


def _stopped_while_starting() -> NoReturn:
    rclpy.try_shutdown()
    raise SystemExit(0)


class Spinning:
    """A node spun by a multi-threaded executor in a background thread, ended in order by `close()`."""

    def __init__(self, node: Node, threads: int) -> None:
        self.node = node
        executor = MultiThreadedExecutor(num_threads=threads)
        executor.add_node(node)
        self._spin = BackgroundSpin(executor)

    def close(self, before_stop: Callable[[], None] | None = None) -> None:
        """Ignore further SIGINTs, run `before_stop` while the executor spins, then stop, destroy, shut down."""
        shield_shutdown()
        try:
            if before_stop is not None:
                before_stop()
        finally:
            self._spin.stop()
            self.node.destroy_node()
            rclpy.try_shutdown()


def wait_for_signal() -> None:
    """Block the main thread until SIGINT or SIGTERM (Ctrl-C, `ros2 launch` shutting down)."""
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    while not stopping.wait(1.0):
        pass


def serve(program: str, factory: Callable[[], Node], *, threads: int = 8,
          shutdown: Callable[[Any], None] | None = None) -> None:
    """Build the node, spin it until a signal, then `shutdown(node)` while it still spins, and exit 0."""
    node = build(program, factory)
    spinning = Spinning(node, threads)
    try:
        wait_for_signal()
    finally:
        spinning.close(None if shutdown is None else lambda: shutdown(node))


def run_runtime_node(program: str, factory: Callable[[], Any], args: list[str] | None = None) -> None:
    """The main() of a runtime node executable (rpent_ros.runtime.runtime_node, rpent_ros.runtime.managed_node and the
    robots' nodes built on them): init, serve, and on the way out the node's own shutdown()."""
    init(args)
    serve(program, factory, shutdown=lambda node: node.shutdown())
