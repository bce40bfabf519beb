"""The lifecycle node the arm, gripper and camera nodes are built on (rpent_ros.runtime.lifecycle: what each
state serves; rpent_ros.runtime.diagnostics: the health it publishes).

A subclass declares its parameters (checked at start, before anything connects), says how to
connect (`connect`) and what telemetry to run once connected (`start_telemetry`). Transitions and
the process's own end (`shutdown`) take one lock, so a Ctrl-C during a configure waits for it to
give up (the connect retries stop at once) instead of racing it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from rclpy.timer import Timer

from rpent_ros.params import NodeParameters, Param
from rpent_ros.runtime.diagnostics import RateMeter, RuntimeDiagnostics
from rpent_ros.runtime.lifecycle import ACTIVE, FINALIZED, UNCONFIGURED, ManagedRuntime
from rpent_ros.runtime.server import RuntimeServer

SUCCESS, FAILURE = TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE

COMMON_PARAMETERS = (
    Param("connect_wait_s", 60.0, "seconds configure keeps retrying a device that is not reachable yet "
          "(the robot, or franky-sim, may come up after this node)", low=0.0, high=3600.0),
    Param("diagnostics_period_s", 1.0, "seconds between two /diagnostics messages", low=0.05, high=60.0),
)


class ManagedRuntimeNode(LifecycleNode):
    """Serves one runtime object at `~/<name>/call` as its lifecycle state allows."""

    kind = "runtime"  # "arm", "gripper", "camera": the runtime's label is "<kind> <name>"
    # Its leased calls make leased calls of their own, which relay their lease (rpent_ros.runtime.lease).
    relays_leases = False

    def __init__(self, node_name: str, params: Sequence[Param], methods: frozenset[str], gated: frozenset[str],
                 *, acts: str = "motions", **kwargs: Any) -> None:
        super().__init__(node_name, automatically_declare_parameters_from_overrides=True, **kwargs)
        parameters = NodeParameters(self)
        try:
            self.params = parameters.declare(*params, *COMMON_PARAMETERS)
            parameters.finish()
        except ValueError:  # refused at start: leave no half-made node behind
            self.destroy_node()
            raise
        self.runtime_name = str(self.params["name"])
        self.managed = ManagedRuntime(f"{self.kind} {self.runtime_name}", self.get_fully_qualified_name(), gated,
                                      acts=acts)
        self.server = RuntimeServer(self, self.runtime_name, self.managed, methods, ReentrantCallbackGroup(),
                                    relays=self.relays_leases)
        self.telemetry_rate = RateMeter()
        self.diagnostics = RuntimeDiagnostics(self, self.managed, self.hardware_id(),
                                              self.params["diagnostics_period_s"], self.telemetry_rate)
        self._telemetry_timers: list[Timer] = []
        self._stopping = threading.Event()
        self._transition = threading.Lock()
        self.get_logger().info(f"{self.managed.label} ({self.hardware_id()}): unconfigured, serving ~/{self.runtime_name}/call; "
                               f"configure connects, activate admits {self.managed.acts}")

    # --- what a kind of node says -----------------------------------------------------------------
    def hardware_id(self) -> str:
        return str(self.params.get("ip") or self.runtime_name)

    def connect(self) -> Any:
        """The runtime object, connected (called by configure, retried until connect_wait_s)."""
        raise NotImplementedError

    def start_telemetry(self, target: Any) -> None:
        """Timers publishing `target`'s telemetry (`self.every`); they end with cleanup."""

    def served_functions(self) -> dict[str, Callable[..., Any]]:
        """Functions served beside the runtime's methods, each called as function(runtime, ...)."""
        return {}

    def every(self, rate_hz: float, callback: Callable[[], None], *, active_only: bool = False) -> None:
        """Call `callback` at `rate_hz` while configured (`active_only`: while active); failures are logged."""

        def guarded() -> None:
            if active_only and self.managed.lifecycle_state != ACTIVE:
                return
            try:
                callback()
            except Exception as exc:  # telemetry must not take the node down
                self.get_logger().warning(f"telemetry: {type(exc).__name__}: {exc}", throttle_duration_sec=5.0)
                return
            self.telemetry_rate.tick()

        self._telemetry_timers.append(self.create_timer(1.0 / rate_hz, guarded, callback_group=MutuallyExclusiveCallbackGroup()))

    # --- transitions ------------------------------------------------------------------------------
    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._transition:
            if self.managed.lifecycle_state == FINALIZED:
                return FAILURE
            try:
                target = self._connect()
            except Exception as exc:
                self.diagnostics.connect_error = f"{type(exc).__name__}: {exc}"
                self.get_logger().error(f"configure: {self.managed.label} not connected: {self.diagnostics.connect_error}")
                return FAILURE
            self.diagnostics.connect_error = ""
            self.managed.attach(target, self.served_functions())
            try:
                self.start_telemetry(target)
            except Exception as exc:
                self.get_logger().error(f"configure: telemetry of {self.managed.label}: {type(exc).__name__}: {exc}")
                self._disconnect(UNCONFIGURED)
                return FAILURE
            self.get_logger().info(f"{self.managed.label} connected ({self.hardware_id()}); inactive: "
                                   f"{self.managed.acts} refused until activated")
            return SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._transition:
            try:
                self.managed.activate()
            except Exception as exc:
                self.get_logger().error(f"activate: {exc}")
                return FAILURE
            self.get_logger().info(f"{self.managed.label} active: {self.managed.acts} admitted")
            return SUCCESS

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._transition:
            self._stop_acting()
            self.get_logger().info(f"{self.managed.label} inactive: {self.managed.acts} stopped and refused")
            return SUCCESS

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._transition:
            self._disconnect(UNCONFIGURED)
            return SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._transition:
            self._disconnect(FINALIZED)
            return SUCCESS

    def on_error(self, state: LifecycleState) -> TransitionCallbackReturn:
        with self._transition:
            self._disconnect(UNCONFIGURED)
            return SUCCESS

    def shutdown(self) -> None:
        """The process ends (Ctrl-C, a test's teardown): stop any motion and disconnect, in any state."""
        self._stopping.set()
        with self._transition:
            if self.managed.lifecycle_state != FINALIZED:
                self._disconnect(FINALIZED)
        self.server.close()

    # --- helpers ----------------------------------------------------------------------------------
    def _connect(self) -> Any:
        deadline = time.monotonic() + float(self.params["connect_wait_s"])
        while True:
            try:
                return self.connect()
            except Exception as exc:
                if self._stopping.is_set() or time.monotonic() >= deadline:
                    raise
                self.get_logger().info(f"{self.managed.label} not reachable yet ({exc}); retrying",
                                       throttle_duration_sec=10.0)
            if self._stopping.wait(0.5):
                raise RuntimeError("the node is shutting down")

    def _stop_acting(self) -> None:
        try:
            self.managed.deactivate()
        except Exception as exc:  # still inactive: nothing new is admitted
            self.get_logger().error(f"{self.managed.label}: stop failed: {type(exc).__name__}: {exc}")

    def _disconnect(self, state: str) -> None:
        for timer in self._telemetry_timers:
            self.destroy_timer(timer)
        self._telemetry_timers.clear()
        self._stop_acting()
        target = self.managed.detach(state)
        close = getattr(target, "close", None)
        if callable(close):
            try:
                close()
            except Exception as exc:
                self.get_logger().error(f"{self.managed.label}: close failed: {type(exc).__name__}: {exc}")
