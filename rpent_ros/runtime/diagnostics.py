"""A runtime node's health on /diagnostics (diagnostic_msgs/DiagnosticArray), as rqt_robot_monitor
and diagnostic aggregators read it: one status per runtime, once a second by default.

Each status says the lifecycle state, whether the device is connected, how many calls failed and
the last error, the last command and how long ago it was, how often telemetry reads the device,
and what the device reports about itself (FrankyArm.health: robot mode, errors, control rate,
external forces and torques; FrankyGripper.health: temperature, width).

Publishers the node watches (a camera's topics: PublishHealth) count what they could not send: a
camera whose pictures fail to convert (cv_bridge under an OpenCV it does not match) makes its node's
status ERROR with the error and the count, not just a throttled log line, until pictures go out again.
A node without a runtime of its own to report (franky-sim's, with its cameras) publishes one status
per watched publisher (PublisherDiagnostics).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

from rpent_ros.runtime.lifecycle import ACTIVE, UNCONFIGURED, ManagedRuntime

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


class PublishHealth:
    """How one telemetry publisher is doing: messages sent and failed, the last error, and whether
    the latest attempt failed. Thread-safe (timers publish, the diagnostics timer reads)."""

    def __init__(self, label: str) -> None:
        self.label = label  # "camera front"
        self.published = 0
        self.failed = 0
        self.last_error = ""
        self.failing = False
        self._lock = threading.Lock()

    def sent(self) -> None:
        with self._lock:
            self.published += 1
            self.failing = False

    def failure(self, exc: BaseException) -> None:
        with self._lock:
            self.failed += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            self.failing = True

    def snapshot(self) -> tuple[int, int, str, bool]:
        with self._lock:
            return self.published, self.failed, self.last_error, self.failing

    def problem(self) -> str:
        """What a failing publisher's status says; empty while it publishes."""
        published, failed, error, failing = self.snapshot()
        if not failing:
            return ""
        return f"{self.label} cannot publish its pictures: {error} ({failed} failed, {published} sent)"


class RuntimeDiagnostics:
    """Publishes `<node>: <label>` on /diagnostics every `period_s` (in every lifecycle state)."""

    def __init__(self, node: Node, managed: ManagedRuntime, hardware_id: str, period_s: float = 1.0,
                 telemetry: RateMeter | None = None) -> None:
        self.node = node
        self.managed = managed
        self.hardware_id = hardware_id
        self.telemetry = telemetry or RateMeter()
        self.connect_error = ""  # why the last configure could not connect
        self.watched: list[PublishHealth] = []
        self.publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        node.create_timer(period_s, self.publish, callback_group=MutuallyExclusiveCallbackGroup())

    def watch(self, health: PublishHealth) -> None:
        """Count `health`'s failures into this node's status, and make it ERROR while it fails."""
        if health not in self.watched:
            self.watched.append(health)

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
        if self.watched:
            snapshots = [h.snapshot() for h in self.watched]
            values["published"] = sum(s[0] for s in snapshots)
            values["failed publishes"] = sum(s[1] for s in snapshots)
            values["last publish error"] = next((s[2] for s in reversed(snapshots) if s[2]), "none")
        robot_errors: list[str] = []
        for key, value in (health or {}).items():
            values[key] = value
            if key == "errors" and value:
                robot_errors = list(value)
        level, message = _judge(managed, connected, health_error or self.connect_error, robot_errors)
        failing = [p for p in (h.problem() for h in self.watched) if p]
        if failing and level == OK:  # active and connected, yet its pictures do not go out
            level, message = ERROR, "; ".join(failing)
        return DiagnosticStatus(
            level=level, name=f"{self.node.get_name()}: {managed.label}", message=message,
            hardware_id=self.hardware_id, values=[KeyValue(key=k, value=_text(v)) for k, v in values.items()],
        )


class PublisherDiagnostics:
    """One status per watched publisher, `<node>: <label>`, on /diagnostics every `period_s`: for a
    node whose publishers are all there is to report (franky-sim's simulated cameras)."""

    def __init__(self, node: Node, watched: list[PublishHealth], hardware_id: str, period_s: float = 1.0) -> None:
        self.node = node
        self.watched = watched
        self.hardware_id = hardware_id
        self.publisher = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        node.create_timer(period_s, self.publish, callback_group=MutuallyExclusiveCallbackGroup())

    def publish(self) -> None:
        msg = DiagnosticArray()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.status = [self.status(health) for health in self.watched]
        self.publisher.publish(msg)

    def status(self, health: PublishHealth) -> DiagnosticStatus:
        published, failed, error, _failing = health.snapshot()
        problem = health.problem()
        values = {"published": published, "failed publishes": failed, "last publish error": error or "none"}
        return DiagnosticStatus(
            level=ERROR if problem else OK, name=f"{self.node.get_name()}: {health.label}",
            message=problem or "publishing", hardware_id=self.hardware_id,
            values=[KeyValue(key=k, value=_text(v)) for k, v in values.items()],
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
