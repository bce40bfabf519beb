"""The Franka's fixed-rate stream (rpent.record.stream): at `hz` samples a second while the robot acts,
each arm's measured state, the action it ran and every camera's picture, for training data.

When: while a call that may move the robot runs (every tool but the read-only ones and the common
tools), but not while the toolkit takes the observation after it (the arm at rest); between calls the
robot waits for its planner, and a policy trained on the stream should not learn to wait. Each sample
names the calls it belongs to. A call's first sample is of its start, measured on the call's thread as
it starts (the pictures follow when the sampler takes them), and the rate counts from there: a call
shorter than a period (a home from home) is in the stream too.

The clock is the robot's own (the first arm's franky state time): the rate is `hz` in the robot's time,
as the policy's control steps are (robots.franka.policy.stream), also when franky-sim runs slower than the
wall clock on a loaded machine. A streamed policy step is queued the moment it is sent, with its due time
and the state it was computed from, and the timer waits while steps come: each step is exactly one sample,
whose action is the velocity the arm was sent (when the cameras render slower than steps come, a few steps
share a picture).

A sample's arm entry:
    q, dq            measured joints [rad] and joint velocities [rad/s]
    ee               end-effector pose in the arm's base frame: x, y, z [m], qx, qy, qz, qw
    gripper_width_m  measured (null without a gripper); gripper_position: DROID's 1 - width / max width
    action           {"source": "policy" | "motion" | "rest", "joint_velocity": the streamed step's velocity
                     [rad/s] (policy; else null: the velocity the arm ran is the next sample's q minus this
                     one's over the period), "gripper": the commanded gripper position (1 closed, 0 open),
                     "target": the running motion's target ({"pose": [...]} or {"joints": [...]}) or null}

Sampling runs on its own thread and pictures are taken by the cameras' own threads, so neither the
control loop nor a motion's wait ever waits for it; encoding runs on the stream writer's thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np

from robots.franka import kinematics
from robots.franka.hardware.commands import Commanded
from rpent.record.stream import StreamWriter
from rpent.runtime.types import quat_from_matrix

if TYPE_CHECKING:
    from pathlib import Path

    from robots.franka.runtime import FrankaRuntime

log = logging.getLogger(__name__)

DEFAULT_HZ = 15.0  # DROID's control rate
# A streamed step's sample stands for its period; the timer takes over this many periods after the last step.
_STEP_GAP_PERIODS = 1.5


def camera_roles(runtime: FrankaRuntime, exterior_first: str | None) -> list[dict[str, Any]]:
    """The header's cameras: wrist cameras name their arm; the policy's exterior camera comes first of the others."""
    entries = []
    for camera in runtime.cameras:
        mount = getattr(camera, "mount", None)
        wrist = mount is not None and mount.mount == "wrist"
        entries.append({"name": camera.name, "width": int(camera.width), "height": int(camera.height),
                        "role": "wrist" if wrist else "exterior", "arm": mount.arm if mount is not None else None})
    entries.sort(key=lambda c: (c["role"] != "exterior", c["name"] != exterior_first))
    return entries


class FrankaRecording:
    """Samples `runtime` into a StreamWriter at `hz` (on the robot's clock) while `acting()` names a call."""

    def __init__(self, runtime: FrankaRuntime, output_dir: Path, segment: int, *, hz: float,
                 acting: Callable[[], list[tuple[int, str]]], header: dict[str, Any],
                 cameras: Sequence[Any] | None = None) -> None:
        """`cameras`: the runtime's unless given (the header's `cameras` describe them, camera_roles)."""
        self.runtime = runtime
        self.period_s = 1.0 / hz
        self._acting = acting
        self._arms = dict(runtime.arms)
        self._clock_arm = next(iter(self._arms.values()))
        self._cameras = list(runtime.cameras if cameras is None else cameras)
        arms = {name: {"joints": 7, "gripper_max_width_m": self._max_width(name)} for name in self._arms}
        self.writer = StreamWriter(output_dir, segment, {"hz": hz, **header, "arms": arms,
                                                         "cameras": header.get("cameras", [])})
        self._pool = ThreadPoolExecutor(max_workers=max(1, len(self._cameras)), thread_name_prefix="rpent-stream-cam")
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by a streamed policy step as it goes out
        # Each streamed step as it went out, until sampled: every step is a sample of its own, also when the
        # cameras render slower than the steps come (a loaded machine): then a few steps share a picture.
        self._steps: deque[tuple[str, Commanded]] = deque()
        # Each acting call's start as it was measured (robot time, arm entries, the calls acting), until sampled.
        self._starts: deque[tuple[float, dict[str, Any], list[list[Any]]]] = deque()
        self._unlisten = [arm.commands.listen(self._listener(name)) for name, arm in self._arms.items()]
        self._t0: float | None = None
        self._last: float | None = None  # the robot time of the last sample
        self._paused = 0  # pause() depth
        self.samples = 0
        self._latest: dict[str, np.ndarray] | None = None
        runtime.frame_tap = lambda: self._latest  # the episode video shows these instead of rendering again
        self._thread = threading.Thread(target=self._run, name="rpent-stream-sampler", daemon=True)
        self._thread.start()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """No samples meanwhile: the toolkit's observation after a call renders every camera with depth, and the
        arm is at rest; sampling then would only make the observation wait for the renderer."""
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1

    def close(self) -> None:
        if self.runtime.frame_tap is not None:
            self.runtime.frame_tap = None
        self._stop.set()
        self._wake.set()
        self._thread.join(5.0)
        for unlisten in self._unlisten:
            unlisten()
        self._pool.shutdown(wait=True)
        self.writer.close()

    def _max_width(self, arm: str) -> float | None:
        gripper = self.runtime.grippers.get(arm)
        if gripper is None:
            return None
        try:
            return float(gripper.state().max_width_m) or None
        except Exception:
            return None

    def call_started(self) -> None:
        """A call that may move the robot starts (on its thread, before its tool runs): its start is measured now,
        and sampled with the pictures the sampler takes next."""
        try:
            now = self._clock_arm.clock_s()
            arms = {name: self._arm_entry(name, arm) for name, arm in self._arms.items()}
        except Exception:  # the stream is the record's business, never the call's: it runs on without it
            log.debug("stream: a call's start could not be measured", exc_info=True)
            return
        self._starts.append((now, arms, [list(c) for c in self._acting()]))
        self._wake.set()

    def _listener(self, arm: str) -> Callable[[Commanded], None]:
        def on_command(note: Commanded) -> None:
            if note.kind in ("velocity", "joint_target"):
                self._steps.append((arm, note))
                self._wake.set()

        return on_command

    def _run(self) -> None:
        last_step: float | None = None  # robot time of the last streamed step's sample
        due: float | None = None
        while not self._stop.is_set():
            try:
                now = self._clock_arm.clock_s()
            except Exception:  # the arm is gone: the run is ending
                return
            self._wake.clear()
            if self._starts:
                start = self._starts.popleft()
                try:
                    self._sample(start[0], [], start)
                except Exception:
                    log.debug("stream: a sample failed", exc_info=True)
                due = start[0] + self.period_s
                continue
            if not self._acting() or self._paused:
                due = None
                self._steps.clear()
                self._wake.wait(self.period_s)  # idle: look again a period later (a step wakes it at once)
                continue
            steps = [self._steps.popleft() for _ in range(len(self._steps))]
            if not steps and last_step is not None and now - last_step < _STEP_GAP_PERIODS * self.period_s:
                # Steps are coming: the next one makes the next sample.
                self._wake.wait(max(0.001, last_step + _STEP_GAP_PERIODS * self.period_s - now))
                continue
            if not steps and due is not None and now < due:
                # The robot's clock runs at most as fast as the wall clock: waiting the difference never oversleeps.
                self._wake.wait(due - now)
                continue
            try:
                self._sample(now, steps)
            except Exception:
                log.debug("stream: a sample failed", exc_info=True)
            if steps:
                last_step = now
            due = now + self.period_s if due is None or now - due > self.period_s else due + self.period_s

    def _sample(self, now: float, steps: list[tuple[str, Commanded]],
                start: tuple[float, dict[str, Any], list[list[Any]]] | None = None) -> None:
        """One sample, or one per streamed step (each at the robot time it was due, with the state it was computed
        from and the velocity it sent), or a call's `start` as measured then, all with the pictures taken now."""
        if start is not None and self._last is not None and start[0] <= self._last:
            return  # sampled since it started (another arm's call was acting): that sample names it
        calls = start[2] if start is not None else [list(c) for c in self._acting()]
        if not calls:
            return  # the call ended since the loop looked
        pictures = {camera.name: self._pool.submit(camera.capture) for camera in self._cameras}
        current = start[1] if start is not None else {name: self._arm_entry(name, arm) for name, arm in self._arms.items()}
        samples = []
        for arm, note in steps or [("", None)]:
            at = now
            if note is not None and note.clock_s is not None and (self._last is None or note.clock_s > self._last):
                at = note.clock_s
            if self._t0 is None:
                self._t0 = at
            self._last = at
            arms = dict(current)
            if note is not None:
                arms[arm] = _step_entry(current[arm], self._arms[arm], note)
            samples.append({"t": round(at - self._t0, 4), "wall": round(time.time(), 4), "calls": calls, "arms": arms})
        frames = {name: np.asarray(picture.result(timeout=5.0)) for name, picture in pictures.items()}
        self._latest = frames
        for sample in samples:
            if self.writer.add(sample, frames):
                self.samples += 1

    def _arm_entry(self, name: str, arm: Any) -> dict[str, Any]:
        state = arm.state()
        gripper = self.runtime.grippers.get(name)
        width = max_width = None
        if gripper is not None:
            g = gripper.state()
            width, max_width = float(g.width_m), float(g.max_width_m) or None
        hand: Commanded | None = None if gripper is None else gripper.commands.last
        return {
            "q": [round(q, 6) for q in state.joints],
            "dq": [round(v, 6) for v in state.joint_velocities],
            "ee": [round(float(x), 6) for x in (*state.pose.position, *state.pose.quaternion)],
            "gripper_width_m": None if width is None else round(width, 5),
            "gripper_position": None if width is None or not max_width else round(1.0 - width / max_width, 5),
            "action": _action(arm.commands.last, hand, max_width, state.moving),
        }


def _step_entry(entry: dict[str, Any], arm: Any, step: Commanded) -> dict[str, Any]:
    """`entry` (the arm measured now) as of a streamed step: the joints the step was computed from, where that put
    the hand, and the velocity it sent; the gripper as measured now."""
    stepped = dict(entry)
    if step.joints is not None and step.joint_velocities is not None:
        tcp = kinematics.flange_pose(step.joints) @ arm.envelope.flange_to_tcp
        stepped["q"] = [round(q, 6) for q in step.joints]
        stepped["dq"] = [round(v, 6) for v in step.joint_velocities]
        stepped["ee"] = [round(float(x), 6) for x in (*tcp[:3, 3], *quat_from_matrix(tcp[:3, :3]))]
    velocity = None if step.velocity is None else [round(v, 6) for v in step.velocity]
    stepped["action"] = {"source": "policy", "joint_velocity": velocity, "gripper": entry["action"]["gripper"],
                         "target": step.target}
    return stepped


def _action(note: Commanded | None, hand: Commanded | None, max_width: float | None, moving: bool) -> dict[str, Any]:
    gripper = None
    if hand is not None and hand.width_m is not None and max_width:
        gripper = round(min(1.0, max(0.0, 1.0 - hand.width_m / max_width)), 5)
    if note is not None and moving and note.kind in ("cartesian", "joints"):
        return {"source": "motion", "joint_velocity": None, "gripper": gripper, "target": note.target}
    return {"source": "motion" if moving else "rest", "joint_velocity": None, "gripper": gripper, "target": None}
