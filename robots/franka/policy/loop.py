"""One Franka arm driven by an openpi DROID policy server: observe, infer, execute a chunk, again.

`FrankaPolicy.run` is what the `run_policy` tool calls (in the toolkit's process, or in the
vla_client_node with runtime_mode ros: the arm, gripper and cameras are then proxies of their
nodes). Per inference it captures the exterior and the wrist camera, reads the measured joints
and gripper, asks the server (rpent.rpc.transport.vla_openpi: deadlines, reconnects, a size cap) and hands
the first `open_loop_horizon` actions to the arm's streaming loop (robots.franka.policy.stream, in
the arm's process: here, or the arm node's run_joint_steps), which checks every step before franky sees it.
Only the gripper changes split a chunk: the hand is commanded when the binarised gripper action
flips, while the arm keeps going.

The run ends on `max_steps`, `max_duration_s`, a stop condition (`gripper_closed`: the measured
grasp holds something; `arm_at_rest`: the policy asked for no motion for a whole chunk), a cancel
(stop() stops the arm at once, from the cancelling thread), a refused step, a reflex, or a policy
error (server gone, timed out, malformed, NaN or wrongly shaped actions: never a motion).
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from robots.franka.config import PolicyConfig
from robots.franka.policy import droid, stream
from robots.franka.policy.step_safety import KeepClear
from rpent.rpc.errors import RpcError
from rpent.runtime.arm import RuntimeFault

log = logging.getLogger(__name__)

STOP_CONDITIONS = ("gripper_closed", "arm_at_rest")
#: A chunk whose every step moves the joints less than this asks the arm to stay where it is.
AT_REST_STEP_RAD = 0.002
GRIPPER_TIMEOUT_S = 30.0
HOLD_TIMEOUT_S = 10.0
#: A hand this close to its full opening is open: an open command would not move it.
OPEN_WITHIN_M = 0.002

OnFrame = Callable[[np.ndarray], None]


def action_space_of(configured: str | None, metadata: dict[str, Any] | None) -> str:
    """The action space: the config's, else what the server's metadata says (`action_space`), else DROID's."""
    if configured is not None:
        return configured
    announced = (metadata or {}).get("action_space")
    return announced if announced in droid.ACTION_SPACES else "joint_velocity"


def hand_closing(state: Any) -> bool | None:
    """The binarised command a hand in `state` already obeys: close (it holds something), open (fully
    open), or None (half open, or closed on nothing): the policy's first command is then sent."""
    if state.grasped:
        return True
    if state.width_m >= state.max_width_m - OPEN_WITHIN_M:
        return False
    return None


class _Hand:
    """The gripper as a policy drives it: binarised commands run beside the arm's steps, in a thread of
    their own, so the arm's loop never waits for the hand (a grasp can take seconds). A command given
    while another runs goes after it; of several given meanwhile, only the last."""

    def __init__(self, gripper: Any, force_n: float) -> None:
        self.gripper = gripper
        self.force_n = force_n
        self.closing: bool | None = None
        self._pending: bool | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None  # the last worker, joined by wait()
        self._worker: threading.Thread | None = None  # the worker taking commands now, if any
        self.error: str | None = None

    def command(self, close: bool) -> None:
        if self.gripper is None or close == self.closing:
            return
        with self._lock:
            self.closing, self._pending = close, close
            if self._worker is None:  # else the running worker takes it next
                self._worker = self._thread = threading.Thread(target=self._run, name="rpent-policy-gripper",
                                                               daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                close, self._pending = self._pending, None
                if close is None:
                    self._worker = None
                    return
            try:
                if close:
                    self.gripper.grasp(0.0, self.force_n, timeout_s=GRIPPER_TIMEOUT_S)
                else:
                    self.gripper.open(timeout_s=GRIPPER_TIMEOUT_S)
            except Exception as exc:  # reported with the run's result
                self.error = f"{type(exc).__name__}: {exc}"

    @property
    def busy(self) -> bool:
        with self._lock:
            return self._worker is not None

    def wait(self, timeout_s: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout_s)

    def holds(self) -> bool:
        """The last close has ended and the fingers stopped on something (measured)."""
        return bool(self.closing) and not self.busy and bool(self.gripper.state().grasped)


class FrankaPolicy:
    """An openpi DROID policy for one arm: `run` drives it, `stop` ends a run at once, from any thread."""

    def __init__(self, client: Any, arm: Any, gripper: Any, exterior_camera: Any, wrist_camera: Any,
                 config: PolicyConfig, run_steps: Callable[..., dict[str, Any]] | None = None) -> None:
        self.client = client
        self.arm = arm
        # Executes one chunk beside the arm: robots.franka.policy.stream on this arm, or its node's run_joint_steps.
        self.run_steps = run_steps or functools.partial(stream.run, arm)
        self.gripper = gripper
        self.exterior_camera = exterior_camera
        self.wrist_camera = wrist_camera
        self.config = config
        self.name = getattr(arm, "name", "arm")
        self._cancel = threading.Event()
        self._hand: _Hand | None = None
        self.stop_sent_s: float | None = None

    # --- the run -------------------------------------------------------------------------------
    def run(
        self,
        instruction: str,
        max_steps: int,
        stop_when: Sequence[str] = (),
        max_duration_s: float | None = None,
        keep_clear: Sequence[KeepClear | dict[str, Any]] = (),
        cancel: threading.Event | None = None,
        on_frame: OnFrame | None = None,
    ) -> dict[str, Any]:
        """Let the policy drive the arm until a stop; the result says why and where the arm ended."""
        unknown = sorted(set(stop_when) - set(STOP_CONDITIONS))
        if unknown:
            raise ValueError(f"stop_when: unknown conditions {unknown}; known: {list(STOP_CONDITIONS)}")
        if max_steps < 1:
            raise ValueError(f"max_steps: must be at least 1, got {max_steps}")
        self._cancel = cancel if cancel is not None else threading.Event()
        self.stop_sent_s = None
        run = _Run(self, instruction, max_steps, tuple(stop_when), max_duration_s,
                   [k.to_dict() if isinstance(k, KeepClear) else k for k in keep_clear], on_frame)
        self._hand = run.hand
        try:
            return run.execute()
        finally:
            self._hand = None

    def stop(self) -> None:
        """Stop the arm now and end the run (also a pending inference); a held object stays held."""
        self._cancel.set()
        self.stop_sent_s = time.perf_counter()
        self.arm.stop()
        self.client.interrupt()
        hand = self._hand
        if hand is not None and hand.busy and not hand.closing:
            self.gripper.stop()

    def metadata(self) -> dict[str, Any]:
        return self.client.connect()

    def close(self) -> None:
        self.client.close()


class _Run:
    def __init__(self, policy: FrankaPolicy, instruction: str, max_steps: int, stop_when: tuple[str, ...],
                 max_duration_s: float | None, keep_clear: list[dict[str, Any]], on_frame: OnFrame | None) -> None:
        self.policy = policy
        self.config = policy.config
        self.instruction = instruction
        self.max_steps = max_steps
        self.stop_when = stop_when
        self.deadline = None if max_duration_s is None else time.monotonic() + max_duration_s
        self.keep_clear = keep_clear
        self.on_frame = on_frame
        self.hand = _Hand(policy.gripper, self.config.grasp_force_n)
        self.steps = 0
        self.inferences: list[dict[str, Any]] = []
        self.control = _Control(1000.0 / self.config.control_hz)
        self.result: dict[str, Any] = {}
        self.action_space = "joint_velocity"

    @property
    def cancelled(self) -> bool:
        return self.policy._cancel.is_set()

    def execute(self) -> dict[str, Any]:
        reason: str | None = None
        try:
            self.action_space = action_space_of(self.config.action_space, self.policy.client.connect())
            if self.policy.gripper is not None:
                self.hand.closing = hand_closing(self.policy.gripper.state())
            while reason is None:
                reason = self._stop_reason(at_rest=False) or self._one_inference()
        except (RpcError, droid.PolicyReplyError) as exc:
            reason = self._failed("policy_error", exc)
        except RuntimeFault as exc:
            reason = self._failed("reflex" if "reflex" in str(exc).lower() else "fault", exc)
        return self._finish(reason)

    def _failed(self, reason: str, exc: BaseException) -> str:
        if self.cancelled:
            return "cancelled"  # an interrupted inference fails because of the cancel: say so
        self._stop_arm()
        self.result["error"] = f"{type(exc).__name__}: {exc}"
        return reason

    def _stop_reason(self, at_rest: bool) -> str | None:
        if self.cancelled:
            return "cancelled"
        if self.steps >= self.max_steps:
            return "max_steps"
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return "max_duration"
        if "gripper_closed" in self.stop_when and self.policy.gripper is not None and self.hand.holds():
            return "gripper_closed"
        if at_rest and "arm_at_rest" in self.stop_when:
            return "arm_at_rest"
        return None

    def _one_inference(self) -> str | None:
        observation, took_s = self._observe()
        started = time.perf_counter()
        try:
            reply = self.policy.client.infer(observation)
        finally:
            latency_ms = (time.perf_counter() - started) * 1000
            # Shown once the reply is in (or the call failed): a frame's publishing (300 kB through DDS
            # under ROS) would share the machine with the round trip.
            self._show(observation)
        chunk = droid.action_chunk(reply, self.config.open_loop_horizon)
        self.inferences.append({
            "inference": len(self.inferences), "step": self.steps,
            "chunk_shape": list(np.shape(reply["actions"])),
            "first_action": [round(float(v), 4) for v in chunk[0]],
            "latency_ms": round(latency_ms, 2), "observation_ms": round(took_s * 1000, 2),
        })
        chunk = chunk[: self.max_steps - self.steps]
        closes = [droid.gripper_closes(action) for action in chunk]
        start = 0
        while start < len(chunk):
            end = next((i for i in range(start, len(chunk)) if closes[i] != closes[start]), len(chunk))
            self.hand.command(closes[start])
            reason = self._segment(chunk[start:end, :7], continues=start > 0)
            if reason is not None:
                return reason
            start = end
        moved = self._step_motion(chunk)
        return self._stop_reason(at_rest=moved < AT_REST_STEP_RAD)

    def _step_motion(self, chunk: np.ndarray) -> float:
        """The largest joint change any step of the chunk asks for."""
        if self.action_space == "joint_velocity":
            return float(np.max(np.abs(np.clip(chunk[:, :7], -1, 1)))) * droid.MAX_JOINT_DELTA_RAD
        joints = np.asarray(self.policy.arm.state().joints)
        return float(np.max(np.abs(chunk[:, :7] - joints)))

    def _segment(self, actions: np.ndarray, continues: bool) -> str | None:
        if self.cancelled:  # a cancel during the observation or the inference: no step goes out after it
            return "cancelled"
        report = self.policy.run_steps(
            actions.tolist(), action_space=self.action_space, motion=self.config.motion,
            period_s=1.0 / self.config.control_hz, first_step=self.steps,
            keep_clear=self.keep_clear, cancel=self.policy._cancel,
        )
        self.steps += int(report["steps"])
        self.control.add(report, continues)
        if "stop" in report:
            self.result["stop"] = {**self.result.get("stop", {}), **report["stop"]}
        stopped = report["stopped"]
        if stopped is None:
            return None
        if stopped == "stopped" or self.cancelled:
            return "cancelled"
        if stopped == "refused":
            self.result["refused"] = report["refused"]
        self.result["error"] = report["error"]
        return stopped

    def _observe(self) -> tuple[dict[str, Any], float]:
        started = time.perf_counter()
        exterior = droid.policy_image(self.policy.exterior_camera.capture())
        wrist = droid.policy_image(self.policy.wrist_camera.capture())
        joints = self.policy.arm.state().joints
        gripper = 0.0
        if self.policy.gripper is not None:
            state = self.policy.gripper.state()
            gripper = droid.gripper_position(state.width_m, state.max_width_m)
        took = time.perf_counter() - started
        return droid.observation(exterior, wrist, joints, gripper, self.instruction), took

    def _show(self, observation: dict[str, Any]) -> None:
        """What the policy saw, side by side, to the record (under ROS: a feedback message to the toolkit)."""
        if self.on_frame is not None:
            self.on_frame(np.concatenate([observation[droid.EXTERIOR_IMAGE_KEY], observation[droid.WRIST_IMAGE_KEY]], axis=1))

    def _stop_arm(self) -> None:
        try:
            self.policy.arm.stop()
        except Exception as exc:
            log.warning("%s: stop failed: %s", self.policy.name, exc)

    def _finish(self, reason: str) -> dict[str, Any]:
        arm, hand = self.policy.arm, self.hand
        if reason == "cancelled":
            hand.wait(0.0)
        else:
            hand.wait(GRIPPER_TIMEOUT_S)
        try:
            arm.wait(timeout_s=HOLD_TIMEOUT_S)  # the last hold, or what a stop left
        except RuntimeFault as exc:
            self.result.setdefault("error", str(exc))
        state = arm.settled_state()
        result: dict[str, Any] = {
            "arm": self.policy.name, "stopped": reason, "steps": self.steps, "inferences": len(self.inferences),
            "action_space": self.action_space, "motion": self.config.motion,
            "pose": state.pose.to_dict(), "joints_rad": [round(q, 5) for q in state.joints],
        }
        if self.policy.gripper is not None:
            gripper = self.policy.gripper.state()
            result.update(grasped=gripper.grasped, gripper_width_m=round(gripper.width_m, 5))
        if hand.error:
            result["gripper_error"] = hand.error
        result.update(self.result)
        result["control"] = self.control.summary()
        result["inference_log"] = self.inferences
        if self.policy.stop_sent_s is not None:
            result.setdefault("stop", {})["policy_stop_s"] = self.policy.stop_sent_s
        return result


class _Control:
    """How regular the control steps were within chunks (on the robot's clock), what this machine's
    clock made of them, what each step's check cost, and how closely the arm followed."""

    def __init__(self, nominal_ms: float) -> None:
        self.nominal_ms = nominal_ms
        self.periods_ms: list[float] = []
        self.wall_periods_ms: list[float] = []
        self.check_ms: list[float] = []
        self.tracking: list[float] = []
        self.scales: list[float] = []
        self._last: tuple[float, float] | None = None  # the last step's (robot, machine) clock
        self.bound: str | None = None  # what set the smallest scale

    def add(self, report: dict[str, Any], continues: bool = False) -> None:
        """One segment's steps; `continues`: it goes on the chunk of the segment before (a gripper change
        split them), so the period between the two counts too."""
        clocks, walls = report["step_clock_s"], report["step_times_s"]
        if continues and clocks and self._last is not None:
            clocks, walls = [self._last[0], *clocks], [self._last[1], *walls]
        self._last = (clocks[-1], walls[-1]) if clocks else None
        self.periods_ms += [(b - a) * 1000 for a, b in itertools.pairwise(clocks)]
        self.wall_periods_ms += [(b - a) * 1000 for a, b in itertools.pairwise(walls)]
        self.check_ms += report["check_ms"]
        self.tracking += report["tracking_error_rad"]
        if report.get("scale") and (not self.scales or min(report["scale"]) < min(self.scales)):
            self.bound = report.get("bound")
        self.scales += report.get("scale", [])

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {"period_ms": round(self.nominal_ms, 2), "periods": len(self.periods_ms)}
        if self.periods_ms:
            deviation = np.abs(np.asarray(self.periods_ms) - self.nominal_ms)
            summary.update(p50_deviation_ms=_round(np.percentile(deviation, 50)),
                           p99_deviation_ms=_round(np.percentile(deviation, 99)), max_deviation_ms=_round(deviation.max()),
                           # Below 1: the robot's clock ran slower than this machine's (a loaded franky-sim).
                           clock_rate=_round(sum(self.periods_ms) / sum(self.wall_periods_ms)))
        if self.check_ms:
            summary.update(p50_check_ms=_round(np.percentile(self.check_ms, 50)),
                           p99_check_ms=_round(np.percentile(self.check_ms, 99)))
        if self.scales:
            # Steps shaped down to a velocity limit (as DROID's robot scales a whole action), how far at most.
            scaled = [v for v in self.scales if v < 1.0]
            summary.update(scaled_steps=len(scaled), smallest_scale=_round(min(self.scales)))
            if scaled:
                summary["smallest_scale_bound_by"] = self.bound
        if self.tracking:
            summary.update(mean_tracking_error_rad=round(float(np.mean(self.tracking)), 5),
                           max_tracking_error_rad=round(float(np.max(self.tracking)), 5))
        return summary


def _round(value: Any) -> float:
    return round(float(value), 3)
