"""`Arm` on franky: one FCI connection, asynchronous motions that any thread can stop.

Every `start_*` checks the safety envelope (target and path, from the measured joints) first and
raises MotionRefused before franky is touched. Poses are computed from the measured joints with
the arm's own end-effector transform (F_T_EE), not taken from O_T_EE, which franky-sim derives
from the commanded joints. All franky errors surface as RuntimeFault with the arm's name and host.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

import franky
import numpy as np

from robots.franka import kinematics
from robots.franka.hardware.commands import CommandLog
from robots.franka.hardware.connect import RobotLink, connect_with_timeout
from robots.franka.safety import SafetyEnvelope
from robots.franka.safety_limits import FR3_JOINT_ACCELERATION_MAX, FR3_JOINT_JERK_MAX
from rpent.loopback import is_loopback
from rpent.runtime.arm import RuntimeFault, TrajectoryFailure
from rpent.runtime.types import ArmState, MotionOutcome, Pose, quat_from_matrix

log = logging.getLogger(__name__)

# How often a waiting thread looks at its cancel event when nobody wired stop() to the cancel.
# join_motion blocks in C++ without the GIL, so the slice costs the in-process simulator nothing.
_WAIT_SLICE_S = 0.02
# After a motion ends the joints still converge on the last command for a moment (a real FR3 within
# a few ms, franky-sim's PD hold within ~0.3 s): a result is measured once they are at rest.
_SETTLE_TIMEOUT_S = 1.0
# ... and at most this long on the wall clock, whatever the robot's clock does (a simulator that stalled).
_SETTLE_WALL_CAP_S = 10.0
_AT_REST_RAD_S = 0.01
# Joint 7's reading chatters at about +-0.08 rad/s once it has moved (franky-sim), so it gets a wider band.
_AT_REST_J7_RAD_S = 0.1
# Faster than this on any joint, the arm is moving whether or not franky is in control.
_MOVING_RAD_S = 0.1
_FCI_PORT = 1337
# How long a launch waits for the robot to report the motion it was sent (robot_mode Move): a few ms
# on franky-sim and on a real arm; longer means the robot never took it, which wait() then reports.
_START_TIMEOUT_S = 1.0
# Ruckig's result codes for an online trajectory it could not compute (franky: "Motion planner failed
# with error code N"): -101 a duration out of its numeric range, -110 the execution time, -111 the
# synchronisation of the degrees of freedom. franky re-plans from its own extrapolated state whenever
# a control step came late (waypoint_motion.hpp), and on a loaded machine that state can be one Ruckig
# has no answer for. The other codes (-100 invalid input, -102 position limits, -104 zero limits)
# would fail again from any start.
_REPLANNABLE_CODES = frozenset({-101, -110, -111})
_PLANNER_FAILED = re.compile(r"Motion planner failed with error code (-?\d+)")


def _affine(pose: Pose) -> franky.Affine:
    return franky.Affine(np.array(pose.position, dtype=float), np.array(pose.quaternion, dtype=float))


def realtime_config(host: str, realtime: bool | None) -> franky.RealtimeConfig:
    """franky's real-time setting: Enforce on a real arm, Ignore for franky-sim (FCI on loopback).

    A real arm without real-time scheduling misses control cycles under load, which the robot
    answers with communication reflexes (a policy streaming at 15 Hz is such a load), so Ignore
    there is the config's explicit choice and is logged as a risk.
    """
    if realtime is None:
        realtime = not is_loopback(host)
    elif not realtime and not is_loopback(host):
        log.warning("arm at %s: real-time scheduling is not enforced (config realtime: false); without a "
                    "real-time kernel the robot may stop with communication_constraints_violation reflexes", host)
    return franky.RealtimeConfig.Enforce if realtime else franky.RealtimeConfig.Ignore


def _pose(matrix: np.ndarray) -> Pose:
    return Pose(tuple(float(c) for c in matrix[:3, 3]), quat_from_matrix(matrix[:3, :3]))  # type: ignore[arg-type]


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
        link: RobotLink | None = None,
        realtime: bool | None = None,
    ) -> None:
        self.name = name
        self.host = host
        self.link = link or RobotLink(host)
        before = self.link.connections(_FCI_PORT)
        config = realtime_config(host, realtime)
        self._robot: Any = connect_with_timeout(
            lambda: franky.Robot(host, realtime_config=config),
            "arm",
            host,
            connect_timeout_s,
        )
        self.link.watch(_FCI_PORT, before)
        try:
            self._robot.relative_dynamics_factor = franky.RelativeDynamicsFactor(float(dynamics_factor))
            self._robot.set_collision_behavior(float(torque_threshold_nm), float(force_threshold_n))
            self._robot.recover_from_errors()
            flange_to_tcp = np.asarray(self._robot.state.F_T_EE.matrix, dtype=float)
        except Exception as exc:
            raise RuntimeFault(f"{name} at {host}: setup failed: {exc}") from exc
        # The envelope checks the end effector this arm really has (Desk's setting), not an assumed one.
        self.envelope = (envelope or SafetyEnvelope(arm_name=name)).with_tcp(flange_to_tcp)
        # A streamed step's acceleration and jerk: franky's (the FR3's limits times the dynamics factor),
        # lowered to the safety file's max_joint_acceleration_rad_s2. franky scales a motion's limits by a
        # factor of at most 1 on top of the arm's, so the step motions get this share of them.
        fr3_accel = min(FR3_JOINT_ACCELERATION_MAX) * float(dynamics_factor)
        share = min(1.0, min(self.envelope.limits.max_joint_acceleration_rad_s2) / fr3_accel)
        self._step_dynamics = franky.RelativeDynamicsFactor(1.0, share, share)
        #: (deceleration rad/s^2, jerk rad/s^3) a streamed step brakes with when no next step follows:
        #: where its arm comes to rest (robots.franka.policy.step_safety.rest_point).
        self.step_brake = (fr3_accel * share, min(FR3_JOINT_JERK_MAX) * float(dynamics_factor) * share)
        self._lock = threading.Lock()
        self._active = False
        self._stop_requested = threading.Event()
        # perf_counter() when the first stop since the last motion started went out (just before
        # robot.stop()); benchmarks and policy runs read it.
        self.last_stop_sent_s: float | None = None
        #: The last command sent, for the record's stream (robots.franka.recording).
        self.commands = CommandLog()

    # --- state -------------------------------------------------------------------------------
    def state(self) -> ArmState:
        return self._read()[0]

    def clock_s(self) -> float:
        """The robot's own clock (its state's time): the one franky times motions by. Real time on a
        real arm; simulated time on franky-sim, which runs slower than real time on a loaded machine."""
        self.link.check(self.name)
        try:  # the time alone: the policy's step loop paces itself on it
            return float(self._robot.state.time.to_sec())
        except franky.NetworkException as exc:
            raise self.link.lost_fault(self.name, str(exc)) from exc
        except Exception as exc:
            raise RuntimeFault(f"{self.name} at {self.host}: cannot read state: {exc}") from exc

    def _read(self) -> tuple[ArmState, float]:
        """One reading of the robot: its state and the robot's clock at that state."""
        self.link.check(self.name)
        try:
            st = self._robot.state
            joints = tuple(float(q) for q in st.q)
            velocities = tuple(float(v) for v in st.dq)
            clock = float(st.time.to_sec())
            in_control = bool(self._robot.is_in_control)
            has_errors = bool(self._robot.has_errors)
        except franky.NetworkException as exc:
            raise self.link.lost_fault(self.name, str(exc)) from exc
        except Exception as exc:
            raise RuntimeFault(f"{self.name} at {self.host}: cannot read state: {exc}") from exc
        return ArmState(
            pose=_pose(kinematics.flange_pose(joints) @ self.envelope.flange_to_tcp),
            joints=joints,
            joint_velocities=velocities,
            moving=in_control or max(abs(v) for v in velocities) > _MOVING_RAD_S,
            has_errors=has_errors,
        ), clock

    def health(self) -> dict[str, Any]:
        """What the robot reports about itself (for /diagnostics): mode, errors, control loop, external forces."""
        self.link.check(self.name)
        try:
            st = self._robot.state
            readings = {
                "robot mode": str(st.robot_mode).removeprefix("RobotMode."),
                "errors": _error_names(st.current_errors),
                "last motion errors": _error_names(st.last_motion_errors),
                "control rate (Hz)": 1.0 / float(self._robot.control_rate),
                "control command success rate": float(st.control_command_success_rate),
                "external wrench (N, Nm)": [float(v) for v in st.O_F_ext_hat_K],
                "external joint torques (Nm)": [float(v) for v in st.tau_ext_hat_filtered],
            }
        except franky.NetworkException as exc:
            raise self.link.lost_fault(self.name, str(exc)) from exc
        except Exception as exc:
            raise RuntimeFault(f"{self.name} at {self.host}: cannot read state: {exc}") from exc
        return readings

    def settled_state(self, timeout_s: float = _SETTLE_TIMEOUT_S) -> ArmState:
        """The state once every joint is at rest (or after `timeout_s` of the robot's clock): what a motion
        really reached. The robot's clock, because the joints converge in its time: on a loaded machine
        franky-sim runs at a fraction of real time (CI: a pick's first move judged 8 mm short, still
        converging, after 1 s of wall time). A robot whose clock stands still gets _SETTLE_WALL_CAP_S."""
        start = self.clock_s()
        wall_cap = time.monotonic() + max(_SETTLE_WALL_CAP_S, timeout_s)
        while True:
            state, clock = self._read()
            if at_rest(state.joint_velocities) or clock - start >= timeout_s or time.monotonic() >= wall_cap:
                return state
            time.sleep(0.01)

    # --- checks (no motion) ---------------------------------------------------------------------
    def check_cartesian(self, waypoints: Sequence[Pose], speed_factor: float | None = None) -> float:
        """Validate absolute waypoints and the path to them; returns the speed factor that would be used."""
        factor = self.envelope.speed_factor(speed_factor)
        self.cartesian_path(waypoints)
        return factor

    def cartesian_path(self, waypoints: Sequence[Pose]) -> np.ndarray:
        """The checked joint configurations a Cartesian motion from here passes through (N x 7)."""
        if not waypoints:
            raise ValueError("waypoints: at least one pose is required")
        return self.envelope.check_cartesian_motion(self.state().joints, waypoints)

    def joint_path(self, waypoints: Sequence[Sequence[float]]) -> np.ndarray:
        """The checked joint configurations a joint motion from here passes through (N x 7)."""
        if not waypoints:
            raise ValueError("waypoints: at least one joint vector is required")
        return self.envelope.check_joint_motion(self.state().joints, [[float(q) for q in wp] for wp in waypoints])

    def relative_target(self, translation_m: Sequence[float], rotation: Sequence[float] = (0.0, 0.0, 0.0, 1.0)) -> Pose:
        """The absolute pose an offset (base-frame translation, rotation about base axes) leads to."""
        current = self.state().pose
        target = current.translated(translation_m).rotated(rotation)
        self.envelope.check_step(current, target)
        self.envelope.check_pose(target)
        return target

    def check_joints(self, waypoints: Sequence[Sequence[float]], speed_factor: float | None = None) -> float:
        """Validate joint waypoints and the path to them; returns the speed factor that would be used."""
        factor = self.envelope.speed_factor(speed_factor)
        self.joint_path(waypoints)
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
        self.commands.sent("cartesian", target={"pose": [list(wp.position) + list(wp.quaternion) for wp in waypoints]})

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
        self.commands.sent("joints", target={"joints": [[float(q) for q in wp] for wp in waypoints]})

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
            self._await_start()
        if self._stop_requested.is_set():  # a stop came before the robot ran the motion: it found nothing
            self.stop_quietly()

    # --- streamed joint steps (robots.franka.policy.stream: a policy's actions at its control rate) ------
    def stream_joint_velocity(self, velocity: Sequence[float], duration_s: float, *, clock_s: float | None = None,
                              measured: ArmState | None = None) -> None:
        """Run at `velocity` for `duration_s`, then brake to rest, replacing whatever motion runs (no
        check: callers check). The next step replaces it before it brakes; without one the arm comes to
        rest under this motion, never a motion finished while the arm moves (a real arm's reflex).
        `clock_s` (the robot clock the step was due at) and `measured` (the state it was computed from)
        go to the command log only (robots.franka.recording)."""
        duration = franky.Duration(max(1, round(duration_s * 1000)))
        if self._stream(franky.JointVelocityWaypointMotion([
            # Held for the period whether or not the velocity was reached (max_total_duration): a step
            # from rest ramps up within it, so the arm never runs past the target the check judged.
            franky.JointVelocityWaypoint(np.asarray(velocity, dtype=float), hold_target_duration=duration,
                                         max_total_duration=duration),
            franky.JointVelocityWaypoint(np.zeros(7)),
        ], relative_dynamics_factor=self._step_dynamics)):
            self.commands.sent("velocity", velocity=velocity, duration_s=duration_s, clock_s=clock_s, measured=measured)

    def stream_joint_target(self, joints: Sequence[float], *, clock_s: float | None = None,
                            measured: ArmState | None = None) -> None:
        """Go to `joints` and stop there, replacing whatever motion runs (no check: callers check); `clock_s`
        and `measured` as for stream_joint_velocity."""
        if self._stream(franky.JointMotion(franky.JointState(np.asarray(joints, dtype=float)),
                                           relative_dynamics_factor=self._step_dynamics)):
            self.commands.sent("joint_target", target={"joints": [float(q) for q in joints]}, clock_s=clock_s,
                               measured=measured)

    @property
    def stop_requested(self) -> threading.Event:
        """Set by stop() until the next motion starts: a streaming loop waits on it between steps."""
        return self._stop_requested

    def _stream(self, motion: Any) -> bool:
        """Send a streamed step unless a stop has come since the stream began: a loop's thread held up
        between its look at the stop and this move (a loaded machine) would otherwise have franky take
        the step after the stopped motion ended, as a new motion the arm runs for its whole duration."""
        with self._lock:
            if self._stop_requested.is_set():
                return False
            starts = not self._robot.is_in_control  # else franky hands the step to the running control loop
            try:
                self._robot.move(motion, asynchronous=True)
            except franky.NetworkException as exc:
                raise self.link.lost_fault(self.name, str(exc)) from exc
            except Exception as exc:
                raise RuntimeFault(f"{self.name} at {self.host}: motion rejected: {exc}") from exc
            self._active = True
            if starts:
                self._await_start()
        if self._stop_requested.is_set():  # the stop came as the step went out (or before the robot ran it)
            self.stop_quietly()
        return True

    def _await_start(self) -> None:
        """Wait (a few ms) until the robot runs the motion just sent; the caller then sends again a stop that
        came meanwhile. franky sends an asynchronous motion from a thread of its own, so a stop sent before
        the robot has taken the motion reaches a robot with none running, and the motion then runs its
        whole course (libfranka's stop ends only a running motion; CI saw a cancelled 10 cm move end at its
        target). Ended already, or never taken within _START_TIMEOUT_S: wait() reports what happened."""
        deadline = time.monotonic() + _START_TIMEOUT_S
        try:
            while self._robot.is_in_control and self._robot.state.robot_mode != franky.RobotMode.Move:
                if time.monotonic() >= deadline:
                    log.warning("%s: the robot did not report the motion as running within %.1f s",
                                self.name, _START_TIMEOUT_S)
                    return
                time.sleep(0.0005)
        except Exception as exc:  # a lost robot: the motion's own end (wait()) reports it
            log.debug("%s: watching the motion start: %s", self.name, exc)

    def wait(self, timeout_s: float | None = None, cancel: threading.Event | None = None) -> MotionOutcome:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            if cancel is not None and cancel.is_set() and not self._stop_requested.is_set():
                self.stop_quietly()
            slice_s = _WAIT_SLICE_S
            if deadline is not None:
                slice_s = max(0.0, min(slice_s, deadline - time.monotonic()))
            try:
                self.link.check(self.name)  # a robot that closed its connection answers no UDP either
                done = self._robot.join_motion(timeout=slice_s)
            except Exception as exc:
                return self._ended_with(exc)
            if done:
                with self._lock:
                    self._active = False
                stopped = self._stop_requested.is_set()
                return MotionOutcome(finished=not stopped, stopped=stopped)
            if deadline is not None and time.monotonic() >= deadline:
                self.stop_quietly()
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
        unknown = "during a motion, so where the arm stopped is unknown"
        if isinstance(exc, franky.NetworkException):
            raise RuntimeFault(f"{self.link.lost_fault(self.name, str(exc))}; {unknown}") from exc
        if isinstance(exc, RuntimeFault):  # the link saw the robot go, here or in the other client
            raise RuntimeFault(f"{exc}; {unknown}") from exc
        planner = _PLANNER_FAILED.search(str(exc)) if type(exc) is RuntimeError else None
        if planner is not None and int(planner.group(1)) in _REPLANNABLE_CODES:
            raise TrajectoryFailure(f"{self.name} at {self.host}: motion failed: {exc}") from exc
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
        """Stop the running motion; raises RuntimeFault if the robot did not take the stop."""
        if not self._stop_requested.is_set():  # when the first stop of this motion went out
            self.last_stop_sent_s = time.perf_counter()
        self._stop_requested.set()
        self.commands.sent("stop")
        try:
            self._robot.stop()
        except Exception as exc:
            log.warning("%s: stop failed: %s", self.name, exc)
            raise RuntimeFault(f"{self.name} at {self.host}: stop failed: {exc}") from exc

    def stop_quietly(self) -> None:
        """stop() for cancel and clean-up paths, which must go on to stop everything else."""
        try:
            self.stop()
        except RuntimeFault:
            pass  # logged by stop()

    def recover(self) -> bool:
        try:
            return bool(self._robot.recover_from_errors())
        except Exception as exc:
            raise RuntimeFault(f"{self.name} at {self.host}: recovery failed: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            active = self._active
        if active:
            self.stop_quietly()
            self._drain(1.0)
        self._robot = _Closed(self.name)
        self.link.close()


def at_rest(joint_velocities: Sequence[float]) -> bool:
    """Every joint of a measured FR3 at rest (joint 7's reading chatters, so it has a wider band)."""
    v = joint_velocities
    return max(abs(x) for x in v[:6]) < _AT_REST_RAD_S and abs(v[6]) < _AT_REST_J7_RAD_S


def _error_names(errors: Any) -> list[str]:
    """The names of the flags set in a franky Errors value."""
    return [name for name in dir(errors) if not name.startswith("_") and getattr(errors, name) is True]


class _Closed:
    """Stands in for the franky Robot after close(), so late calls fail with a clear message."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, item: str) -> Any:
        raise RuntimeFault(f"{self._name}: the arm connection is closed")
