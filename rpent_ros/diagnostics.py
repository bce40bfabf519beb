"""A runtime node's health on /diagnostics (diagnostic_msgs/DiagnosticArray), as rqt_robot_monitor
and diagnostic aggregators read it: one status per runtime, once a second by default.

Each status says the lifecycle state, whether the device is connected, how many calls failed and
the last error, the last command and how long ago it was, how often telemetry reads the device,
and what the device reports about itself (FrankyArm.health: robot mode, errors, control rate,
external forces and torques; FrankyGripper.health: temperature, width).
"""

from __future__ import annotations

import json
import time
from collections import deque
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from rpent_ros.lifecycle import ACTIVE, UNCONFIGURED, ManagedRuntime

OK, WARN, ERROR = DiagnosticStatus.OK, DiagnosticStatus.WARN, DiagnosticStatus.ERROR


class RateMeter:
    """Events per second over the last few seconds (telemetry reads of the device)."""

    def __init__(self, window_s: float = 5.0) -> None:
        self.window_s = window_s
        self._times: deque[float] = deque()

    def tick(self) -> None:
        now = time.monotonic()
        self._times.append(now)
        while self._times and now - self._times[0] > self.window_s:
            self._times.popleft()

    def rate_hz(self) -> float:
        now = time.monotonic()
        recent = [t for t in self._times if now - t <= self.window_s]
        if len(recent) < 2:
            return 0.0
        return (len(recent) - 1) / max(now - recent[0], 1e-6)


class RuntimeDiagnostics:
    """Publishes `<node>: <label>` on /diagnostics every `period_s` (in every lifecycle state)."""

    def __init__(self, node: Node, managed: ManagedRuntime, hardware_id: str, period_s: float = 1.0,
                 telemetry: RateMeter | None = None) -> None:
        self.node = node
        self.managed = managed
        self.hardware_id = hardware_id
        self.telemetry = telemetry or RateMeter()
        self.connect_error = ""  # why the last configure could not connect
        self.publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        node.create_timer(period_s, self.publish, callback_group=MutuallyExclusiveCallbackGroup())

    def publish(self) -> None:
        msg = DiagnosticArray()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.status = [self.status()]
        self.publisher.publish(msg)

    def status(self) -> DiagnosticStatus:
        managed = self.managed
        values: dict[str, Any] = {"lifecycle state": managed.lifecycle_state}
        health, health_error = None, ""
        if managed.target is not None:
            try:
                health = managed.health()
            except Exception as exc:  # a lost link shows here first
                health_error = f"{type(exc).__name__}: {exc}"
        connected = managed.target is not None and not health_error
        values["connected"] = connected
        values["failed calls"] = managed.failures
        values["last error"] = managed.last_error or "none"
        command = managed.last_command
        values["last command"] = "none" if command is None else f"{command.method}: {command.outcome}"
        values["last command age (s)"] = "" if command is None else round(time.monotonic() - command.at_s, 1)
        values["telemetry rate (Hz)"] = round(self.telemetry.rate_hz(), 1)
        robot_errors: list[str] = []
        for key, value in (health or {}).items():
            values[key] = value
            if key == "errors" and value:
                robot_errors = list(value)
        level, message = _judge(managed, connected, health_error or self.connect_error, robot_errors)
        return DiagnosticStatus(
            level=level, name=f"{self.node.get_name()}: {managed.label}", message=message,
            hardware_id=self.hardware_id, values=[KeyValue(key=k, value=_text(v)) for k, v in values.items()],
        )


def _judge(managed: ManagedRuntime, connected: bool, error: str, robot_errors: list[str]) -> tuple[bytes, str]:
    state = managed.lifecycle_state
    if state == UNCONFIGURED:
        return WARN, f"unconfigured: not connected ({error})" if error else "unconfigured: not connected"
    if not connected:
        return ERROR, f"not connected: {error}"
    if robot_errors:
        return ERROR, "robot errors: " + ", ".join(robot_errors)
    if state != ACTIVE:
        return WARN, f"{state}: {managed.acts} refused"
    return OK, "active"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return json.dumps([round(v, 4) if isinstance(v, float) else v for v in value])
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
