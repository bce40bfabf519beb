"""Hand-eye calibration of one camera: visit poses through the safety envelope, see the board, solve.

Every motion goes the way a tool's does (robots.franka.actions: envelope check of target and path,
operator approval if configured, stop on Ctrl-C), so calibrating cannot take the arm anywhere a
model could not. Flange poses come from the joints measured once the arm is at rest, read before
and after the picture; the picture counts only if the arm did not move in between.

A wrist camera is calibrated against a board lying still (T_flange_camera); a fixed camera
against a board fixed to the flange of its arm (T_base_camera).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robots.franka import actions, kinematics
from robots.franka.calibration.charuco import BoardDetector, BoardNotFound, BoardSpec
from robots.franka.calibration.handeye import CalibrationError, HandEyeResult, HandEyeSample, Mount, solve
from robots.franka.calibration.poses import CalibrationPose, describe
from robots.franka.runtime import FrankaRuntime
from rpent.runtime.arm import MotionRefused, RuntimeFault
from rpent.runtime.camera import Camera, capture_frame
from rpent.tools import ToolContext
from rpent.tools.context import CancelToken

log = logging.getLogger("rpent.calibrate")

# The arm counts as still over a picture if no joint moved more than this between the readings
# before and after it (1e-3 rad is under 1 mm at the hand).
STILL_RAD = 1e-3
STILL_ATTEMPTS = 5


@dataclass(frozen=True)
class QualityLimits:
    """When a result is good enough to write (handeye.HandEyeResult says what each measures).

    The reprojection error is the fine test: corners are found to ~0.1-0.3 px, and a board whose
    printed size is 2 % off already leaves ~0.9 px. Pose consistency also carries each view's own
    PnP error (a small board far away: several mm, about a degree), so its limits only catch gross
    faults: a board that moved, the wrong board, the wrong arm.
    """

    max_reprojection_px: float = 0.5
    max_consistency_mm: float = 10.0
    max_consistency_deg: float = 2.0

    def problems(self, result: HandEyeResult) -> list[str]:
        found = []
        if result.reprojection_rms_px > self.max_reprojection_px:
            found.append(f"reprojection error {result.reprojection_rms_px:.2f} px RMS exceeds --max-reprojection-px "
                         f"{self.max_reprojection_px}")
        if result.consistency_mm > self.max_consistency_mm:
            found.append(f"pose consistency {result.consistency_mm:.2f} mm RMS exceeds --max-consistency-mm "
                         f"{self.max_consistency_mm}")
        if result.consistency_deg > self.max_consistency_deg:
            found.append(f"pose consistency {result.consistency_deg:.3f} deg RMS exceeds --max-consistency-deg "
                         f"{self.max_consistency_deg}")
        if found:
            worst = result.worst()
            found.append(f"worst view: {worst.label} ({worst.reprojection_rms_px:.2f} px, {worst.position_mm:.2f} mm, "
                         f"{worst.angle_deg:.3f} deg)")
        return found


@dataclass(frozen=True)
class Skipped:
    label: str
    reason: str


@dataclass
class CalibrationRun:
    """What a calibration did: the views it used, the poses it skipped and why, and the result."""

    camera: str
    mount: Mount
    arm: str
    samples: list[HandEyeSample] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    result: HandEyeResult | None = None
    elapsed_s: float = 0.0

    @property
    def key(self) -> str:
        """The config field the result goes in."""
        return "T_flange_camera" if self.mount == "wrist" else "T_base_camera"

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "camera": self.camera, "mount": self.mount, "arm": self.arm, "views": len(self.samples),
            "skipped": [{"pose": s.label, "reason": s.reason} for s in self.skipped],
            "elapsed_s": round(self.elapsed_s, 1),
        }  # fmt: skip
        if self.result is not None:
            r = self.result
            out.update({
                self.key: np.round(r.transform, 6).tolist(),
                "reprojection_rms_px": round(r.reprojection_rms_px, 3),
                "reprojection_max_px": round(r.reprojection_max_px, 3),
                "consistency_mm": round(r.consistency_mm, 3),
                "consistency_deg": round(r.consistency_deg, 4),
                "initial_method": r.initial_method,
            })  # fmt: skip
        return out


def calibration_context(runtime: FrankaRuntime, token: CancelToken) -> ToolContext[FrankaRuntime]:
    """The context the tools' motion code runs in; setting `token` stops the arm as a cancelled tool call does."""
    return ToolContext(
        robot=runtime, state={}, memory=None, output_dir=None, call_id=0, tool_name="calibrate",
        cancel_token=token, frame_sink=None, stage_sink=None,
    )  # fmt: skip


def camera_of(runtime: FrankaRuntime, name: str) -> Camera:
    for camera in runtime.cameras:
        if camera.name == name:
            return camera
    raise ValueError(f"--camera: no camera named {name!r}; known: {[c.name for c in runtime.cameras]}")


def mount_of(camera: Camera, runtime: FrankaRuntime) -> tuple[Mount, str]:
    """The camera's mount and the arm it belongs to (the config's, or the simulator's)."""
    mount = getattr(camera, "mount", None)
    if mount is None:
        return "fixed", next(iter(runtime.arms))
    return mount.mount, mount.arm


def calibrate(
    ctx: ToolContext[FrankaRuntime],
    camera: Camera,
    spec: BoardSpec,
    poses: Sequence[CalibrationPose],
    *,
    speed_factor: float | None = None,
) -> CalibrationRun:
    """Visit `poses` in order, take one view at each where the board is seen, and solve.

    A pose the envelope refuses, or one from which the board is not seen, is skipped and logged
    with its name; CalibrationError when too few views remain (naming every skipped pose).
    """
    started = time.monotonic()
    mount, arm_name = mount_of(camera, ctx.robot)
    run = CalibrationRun(camera.name, mount, arm_name)
    detector: BoardDetector | None = None
    for pose in poses:
        ctx.check_cancelled()
        if not _visit(ctx, arm_name, pose, speed_factor, run):
            continue
        joints, frame = _still_view(ctx, arm_name, camera)
        if frame.intrinsics is None:
            raise CalibrationError(
                f"camera {camera.name!r}: no intrinsics (give `intrinsics` in its config entry, or use a camera that reports them)"
            )
        if detector is None:
            detector = BoardDetector(spec, frame.intrinsics)
        try:
            view = detector.detect(frame.rgb)
        except BoardNotFound as exc:
            _skip(run, pose, f"board not visible from this pose ({describe(pose)}): {exc}")
            continue
        run.samples.append(HandEyeSample(pose.label, kinematics.flange_pose(joints), view))
        log.info("%s: board seen (%d corners, %.2f px PnP RMS, %.3f m away)", pose.label, len(view.corner_ids),
                 view.reprojection_rms_px, float(np.linalg.norm(view.T_camera_board[:3, 3])))
    run.elapsed_s = time.monotonic() - started
    if detector is None:
        raise CalibrationError(f"views: none of the {len(poses)} poses could be visited{_skipped_text(run)}")
    try:
        run.result = solve(run.samples, mount, detector.intrinsics.matrix(), _distortion(detector))
    except CalibrationError as exc:
        raise CalibrationError(f"{exc}{_skipped_text(run)}") from None
    run.elapsed_s = time.monotonic() - started
    return run


def _visit(
    ctx: ToolContext[FrankaRuntime], arm_name: str, pose: CalibrationPose, speed_factor: float | None, run: CalibrationRun
) -> bool:
    """Move to the pose the way the motion tools do (a trajectory-generator failure is planned once
    more there, robots.franka.motion); False (logged) if the envelope refused it."""
    try:
        if pose.joints_rad is not None:
            result = actions.move_joints(ctx, arm_name, pose.joints_rad, speed_factor)
        else:
            assert pose.tcp is not None
            result = actions.move_to(ctx, arm_name, pose.tcp.position, (None, None, None), pose.tcp.quaternion, speed_factor)
    except MotionRefused as exc:
        _skip(run, pose, f"the safety envelope refused it ({describe(pose)}): {exc}")
        return False
    except RuntimeFault as exc:
        raise RuntimeFault(f"{pose.label}: {exc}") from exc
    if not result["reached"]:
        # The view still counts: the flange pose comes from the measured joints, not the target.
        log.warning("%s: target not reached (%s); using the pose the arm is in", pose.label, result["cause"])
    return True


def _still_view(ctx: ToolContext[FrankaRuntime], arm_name: str, camera: Camera) -> tuple[tuple[float, ...], Any]:
    """A picture with the joints measured around it, retried while the arm still creeps."""
    arm = ctx.robot.arm(arm_name)
    for _ in range(STILL_ATTEMPTS):
        before = np.asarray(arm.settled_state().joints)
        frame = capture_frame(camera)
        after = np.asarray(arm.state().joints)
        moved = float(np.max(np.abs(after - before)))
        if moved <= STILL_RAD:
            return tuple(float(q) for q in (before + after) / 2), frame
        ctx.check_cancelled()
    raise CalibrationError(
        f"{arm_name}: the arm kept moving while the picture was taken ({math.degrees(moved):.3f} deg between readings)"
    )


def _skip(run: CalibrationRun, pose: CalibrationPose, reason: str) -> None:
    log.warning("%s skipped: %s", pose.label, reason)
    run.skipped.append(Skipped(pose.label, reason))


def _skipped_text(run: CalibrationRun) -> str:
    if not run.skipped:
        return ""
    return "; skipped: " + "; ".join(f"{s.label}: {s.reason}" for s in run.skipped)


def _distortion(detector: BoardDetector) -> np.ndarray:
    return np.asarray(detector.intrinsics.distortion or (0.0,) * 5, dtype=float)
