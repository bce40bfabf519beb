"""`Arm` on franky: one FCI connection, asynchronous motions that any thread can stop.

Every `start_*` checks the safety envelope first and raises MotionRefused before franky is
touched. All franky errors surface as RuntimeFault with the arm's name and host.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import franky
import numpy as np

from robots.franka.connect import connect_with_timeout
from robots.franka.safety import SafetyEnvelope
from rpent.runtime.arm import RuntimeFault
from rpent.runtime.types import ArmState, MotionOutcome, Pose

log = logging.getLogger(__name__)

# How often a waiting thread looks at its cancel event when nobody wired stop() to the cancel.
# join_motion blocks in C++ without the GIL, so the slice costs the in-process simulator nothing.
_WAIT_SLICE_S = 0.02


def _affine(pose: Pose) -> franky.Affine:
    return franky.Affine(np.array(pose.position, dtype=float), np.array(pose.quaternion, dtype=float))


def _pose(affine: franky.Affine) -> Pose:
    t = affine.translation
    q = affine.quaternion
    return Pose((float(t[0]), float(t[1]), float(t[2])), (float(q[0]), float(q[1]), float(q[2]), float(q[3])))


class FrankyArm:
    """A Franka arm reached over FCI (a real robot, or franky-sim on 127.0.0.x)."""

    def __init__(
        self,
        host: str,
        *,
        name: str = "arm",
        envelope: SafetyEnvelope | None = None,
        dynamics_factor: float = 1.0,
        torque_threshold_nm: float = 20.0,
        force_threshold_n: float = 30.0,
        connect_timeout_s: float = 5.0,
    ) -> None:
        self.name = name
        self.host = host
        self.envelope = envelope or SafetyEnvelope(arm_name=name)
        self._robot: Any = connect_with_timeout(
            lambda: franky.Robot(host, realtime_config=franky.RealtimeConfig.Ignore),
            "arm",
            host,
            connect_timeout_s,
        )
        try:
            self._robot.relative_dynamics_factor = franky.RelativeDynamicsFactor(float(dynamics_factor))
            self._robot.set_collision_behavior(float(torque_threshold_nm), float(force_threshold_n))
            self._robot.recover_from_errors()
        except Exception as exc:
            raise RuntimeFault(f"{name} at {host}: setup failed: {exc}") from exc
        self._lock = threading.Lock()
        self._active = False
        self._stop_requested = threading.Event()
        # perf_counter() just before robot.stop() was called last; benchmarks read it.
        self.last_stop_sent_s: float | None = None

    # --- state -------------------------------------------------------------------------------
    def state(self) -> ArmState:
        try:
            st = self._robot.state
            return ArmState(
                pose=_pose(st.O_T_EE),
                joints=tuple(float(q) for q in st.q),
                joint_velocities=tuple(float(v) for v in st.dq),
                moving=bool(self._robot.is_in_control),
                has_errors=bool(self._robot.has_errors),
            )
        except Exception as exc:
            raise RuntimeFault(f"{self.name} at {self.host}: cannot read state: {exc}") from exc

    # --- checks (no motion) ---------------------------------------------------------------------
    def check_cartesian(self, waypoints: Sequence[Pose], speed_factor: float | None = None) -> float:
        """Validate absolute waypoints; returns the speed factor that would be used."""
        if not waypoints:
            raise ValueError("waypoints: at least one pose is required")
        factor = self.envelope.speed_factor(speed_factor)
        for i, wp in enumerate(waypoints):
            self.envelope.check_pose(wp, "target" if len(waypoints) == 1 else f"waypoints[{i}]")
        return factor

    def relative_target(self, translation_m: Sequence[float], rotation: Sequence[float] = (0.0, 0.0, 0.0, 1.0)) -> Pose:
        """The absolute pose an offset (base-frame translation, rotation about base axes) leads to."""
        current = self.state().pose
        target = current.translated(translation_m).rotated(rotation)
        self.envelope.check_step(current, target)
        self.envelope.check_pose(target)
        return target

    def check_joints(self, waypoints: Sequence[Sequence[float]], speed_factor: float | None = None) -> float:
        if not waypoints:
            raise ValueError("waypoints: at least one joint vector is required")
        factor = self.envelope.speed_factor(speed_factor)
        for i, wp in enumerate(waypoints):
            self.envelope.check_joints([float(q) for q in wp], "joints" if len(waypoints) == 1 else f"waypoints[{i}]")
        return factor

    # --- motions -----------------------------------------------------------------------------
    def start_cartesian(self, waypoints: Sequence[Pose], speed_factor: float | None = None) -> None:
        factor = self.check_cartesian(waypoints, speed_factor)
        rdf = self._dynamics(factor)
        motion = franky.CartesianWaypointMotion(
            [franky.CartesianWaypoint(franky.RobotPose(_affine(wp))) for wp in waypoints],
            relative_dynamics_factor=rdf,
        )
        self._launch(motion)

    def start_relative(
        self,
        translation_m: Sequence[float],
        rotation: Sequence[float] = (0.0, 0.0, 0.0, 1.0),
        speed_factor: float | None = None,
    ) -> Pose:
        # Sent as an absolute target, so the pose that was checked is exactly the pose commanded.
        target = self.relative_target(translation_m, rotation)
        self.start_cartesian([target], speed_factor)
        return target

    def start_joints(self, waypoints: Sequence[Sequence[float]], speed_factor: float | None = None) -> None:
        factor = self.check_joints(waypoints, speed_factor)
        motion = franky.JointWaypointMotion(
            [franky.JointWaypoint(np.array(wp, dtype=float)) for wp in waypoints],
            relative_dynamics_factor=self._dynamics(factor),
        )
        self._launch(motion)

    def _dynamics(self, speed_factor: float) -> franky.RelativeDynamicsFactor:
        accel = min(speed_factor, self.envelope.limits.max_acceleration_factor)
        return franky.RelativeDynamicsFactor(speed_factor, accel, accel)

    def _launch(self, motion: Any) -> None:
        with self._lock:
            if self._active:
                raise RuntimeFault(f"{self.name}: a motion is still running; wait for it or stop it first")
            self._stop_requested.clear()
            try:
                self._robot.move(motion, asynchronous=True)
            except Exception as exc:
                raise RuntimeFault(f"{self.name} at {self.host}: motion rejected: {exc}") from exc
            self._active = True

    def wait(self, timeout_s: float | None = None, cancel: threading.Event | None = None) -> MotionOutcome:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            if cancel is not None and cancel.is_set() and not self._stop_requested.is_set():
                self.stop()
            slice_s = _WAIT_SLICE_S
            if deadline is not None:
                slice_s = max(0.0, min(slice_s, deadline - time.monotonic()))
            try:
                done = self._robot.join_motion(timeout=slice_s)
            except Exception as exc:
                return self._ended_with(exc)
            if done:
                with self._lock:
                    self._active = False
                stopped = self._stop_requested.is_set()
                return MotionOutcome(finished=not stopped, stopped=stopped)
            if deadline is not None and time.monotonic() >= deadline:
                self.stop()
                outcome = self._drain(1.0)
                return MotionOutcome(
                    finished=False, stopped=True, timed_out=True, detail=f"timed out after {timeout_s} s; {outcome}"
                )

    def _ended_with(self, exc: BaseException) -> MotionOutcome:
        with self._lock:
            self._active = False
        if self._stop_requested.is_set() and isinstance(exc, franky.ControlException):
            # The expected consequence of robot.stop(): the motion was preempted.
            return MotionOutcome(finished=False, stopped=True, detail=str(exc))
        if isinstance(exc, franky.NetworkException):
            raise RuntimeFault(f"{self.name}: lost connection to the robot at {self.host}: {exc}") from exc
        raise RuntimeFault(f"{self.name} at {self.host}: motion failed: {exc}") from exc

    def _drain(self, timeout_s: float) -> str:
        try:
            self._robot.join_motion(timeout=timeout_s)
            return "motion ended"
        except Exception as exc:
            return str(exc)
        finally:
            with self._lock:
                self._active = False

    def stop(self) -> None:
        self._stop_requested.set()
        self.last_stop_sent_s = time.perf_counter()
        try:
            self._robot.stop()
        except Exception as exc:  # stopping must never raise into a cancel path
            log.warning("%s: stop failed: %s", self.name, exc)

    def recover(self) -> bool:
        try:
            return bool(self._robot.recover_from_errors())
        except Exception as exc:
            raise RuntimeFault(f"{self.name} at {self.host}: recovery failed: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            active = self._active
        if active:
            self.stop()
            self._drain(1.0)
        self._robot = _Closed(self.name)


class _Closed:
    """Stands in for the franky Robot after close(), so late calls fail with a clear message."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, item: str) -> Any:
        raise RuntimeFault(f"{self._name}: the arm connection is closed")
