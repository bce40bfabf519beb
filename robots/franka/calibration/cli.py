"""`rpent calibrate --robot franka`: flags, the run (real arms or franky-sim with a board), and the report.

    rpent calibrate --robot franka --sim --camera front --auto 12 --write
    rpent calibrate --robot franka --camera wrist --poses my_poses.yaml --board 7x5 \\
        --board-square-mm 40 --board-marker-mm 30 --board-dictionary DICT_5X5_100 --write

Exit status: 0 calibrated (and written with --write), 1 calibration failed or its residuals are
too poor to write, 2 bad flags or config. With --sim, --write goes to <config>.sim.yaml, never into
the deployment config itself (robots/franka/calibration/report.py).
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

from robots.franka import actions
from robots.franka.calibration.charuco import BoardDetector, BoardNotFound, BoardSpec, BoardSpecError
from robots.franka.calibration.handeye import CalibrationError
from robots.franka.calibration.poses import CalibrationPose, auto_poses, load_poses
from robots.franka.calibration.procedure import QualityLimits, calibrate, calibration_context, camera_of, mount_of
from robots.franka.calibration.report import Comparison, compare, report_lines, sim_truth
from robots.franka.config import FrankaConfig
from robots.franka.runtime import FrankaRuntime, build_runtime
from rpent.loopback import loopback_hosts
from rpent.robot import ConfigError
from rpent.runtime.arm import MotionRefused, RuntimeFault
from rpent.runtime.camera import capture_frame
from rpent.tools import ToolCancelled
from rpent.tools.context import CancelToken

log = logging.getLogger("rpent.calibrate")
EXIT_FAILED = 1

DEFAULT_BOARD = BoardSpec()
_BOARD_FLAGS = {"squares": "--board", "square_m": "--board-square-mm", "marker_m": "--board-marker-mm",
                "dictionary": "--board-dictionary"}


def add_calibrate_args(parser: argparse.ArgumentParser, default_config: Path) -> None:
    parser.add_argument("--sim", action="store_true",
                        help="calibrate in franky-sim: the scene gets a ChArUco board (on the table for a wrist camera, "
                             "held by the flange for a fixed one) and no objects")
    parser.add_argument("--sim-hosts", metavar="ADDRESSES",
                        help="with --sim: the loopback addresses franky-sim may bind, e.g. 127.0.0.140-169 (default 127.0.0.1-254)")
    parser.add_argument("--config", default=str(default_config),
                        help=f"deployment YAML with the camera; --write stores the result in it (default {default_config.name})")
    parser.add_argument("--safety-file", help="safety envelope YAML (default: the one the deployment YAML names)")
    parser.add_argument("--approve-motions", action="store_true", help="every motion waits for y/n on this terminal")
    parser.add_argument("--camera", required=True, help="the camera to calibrate (its name in the config or the simulator)")
    poses = parser.add_mutually_exclusive_group(required=True)
    poses.add_argument("--poses", metavar="FILE", help="YAML/JSON list of poses to visit (joints_rad, or position_m with rpy_rad)")
    poses.add_argument("--auto", type=int, metavar="N",
                       help="visit the home pose and N poses around it (the board must be in view at home)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --auto poses (default 0)")
    parser.add_argument("--speed-factor", type=float, help="motion speed (default from the safety file, capped there)")
    board = parser.add_argument_group("board (ChArUco)")
    board.add_argument("--board", default="x".join(map(str, DEFAULT_BOARD.squares)), metavar="COLSxROWS",
                       help=f"squares along and across the board (default {DEFAULT_BOARD.squares[0]}x{DEFAULT_BOARD.squares[1]})")
    board.add_argument("--board-square-mm", type=float, default=DEFAULT_BOARD.square_m * 1000,
                       help=f"edge of one square, as printed (default {DEFAULT_BOARD.square_m * 1000:g})")
    board.add_argument("--board-marker-mm", type=float, default=DEFAULT_BOARD.marker_m * 1000,
                       help=f"edge of one ArUco marker (default {DEFAULT_BOARD.marker_m * 1000:g})")
    board.add_argument("--board-dictionary", default=DEFAULT_BOARD.dictionary,
                       help=f"ArUco dictionary of the markers (default {DEFAULT_BOARD.dictionary})")
    quality = parser.add_argument_group("when a result is written")
    limits = QualityLimits()
    quality.add_argument("--write", action="store_true",
                         help="store the result in --config (a backup of it is kept); with --sim in <config>.sim.yaml "
                              "beside it, never in the hardware config")
    quality.add_argument("--max-reprojection-px", type=float, default=limits.max_reprojection_px,
                         help=f"RMS reprojection error over all board corners (default {limits.max_reprojection_px})")
    quality.add_argument("--max-consistency-mm", type=float, default=limits.max_consistency_mm,
                         help=f"RMS spread of the board position the views imply (default {limits.max_consistency_mm})")
    quality.add_argument("--max-consistency-deg", type=float, default=limits.max_consistency_deg,
                         help=f"RMS spread of the board orientation the views imply (default {limits.max_consistency_deg})")
    parser.add_argument("--json", dest="json_out", action="store_true", help="print the result as one JSON object")


def board_from_args(args: argparse.Namespace) -> BoardSpec:
    match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", str(args.board))
    if not match:
        raise ConfigError(f"--board: expected COLSxROWS such as 5x4, got {args.board!r}")
    try:
        return BoardSpec(
            (int(match[1]), int(match[2])), args.board_square_mm / 1000.0, args.board_marker_mm / 1000.0, args.board_dictionary
        )
    except BoardSpecError as exc:
        raise ConfigError(f"{_BOARD_FLAGS[exc.field]}: {exc.rule}") from None


def run_calibrate(args: argparse.Namespace, franka: FrankaConfig) -> int:
    """Calibrate `args.camera` of the deployment `franka` (already read from --config); the exit status."""
    spec = board_from_args(args)
    if args.auto is not None and args.auto < 1:
        raise ConfigError(f"--auto: the number of poses must be at least 1, got {args.auto}")
    file_poses = None
    if args.poses:
        try:
            file_poses = load_poses(args.poses)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    limits = QualityLimits(args.max_reprojection_px, args.max_consistency_mm, args.max_consistency_deg)
    sim_hosts = None
    if args.sim_hosts is not None:
        if not args.sim:
            raise ConfigError("--sim-hosts: only with --sim (real arms are at the hosts of --config)")
        try:
            sim_hosts = loopback_hosts(args.sim_hosts, "--sim-hosts")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    runtime = _start(franka, args.camera, spec, sim=args.sim, approval=args.approve_motions, sim_hosts=sim_hosts)
    token = CancelToken()
    try:
        ctx = calibration_context(runtime, token)
        try:
            camera = camera_of(runtime, args.camera)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        poses = file_poses if file_poses is not None else _auto(ctx, camera, spec, args.auto, args.seed, args.speed_factor)
        run = calibrate(ctx, camera, spec, poses, speed_factor=args.speed_factor)
        truth = sim_truth(runtime, run)
    except (CalibrationError, MotionRefused, RuntimeFault, PermissionError) as exc:
        print(f"rpent calibrate: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except (KeyboardInterrupt, ToolCancelled):
        token.set("interrupted")
        print("rpent calibrate: interrupted; the arm was stopped", file=sys.stderr)
        return EXIT_FAILED
    finally:
        _quietly_stop(runtime)
    assert run.result is not None
    problems = limits.problems(run.result)
    config = Path(args.config).absolute()
    comparison = compare(config, run, truth, args.sim)
    summary = {**run.summary(), "config": str(config), **comparison.summary()}
    written = None
    if args.write and not problems:
        written = _write(config, comparison.target, run, franka)
    summary.update(written or {"written": None})
    summary["problems"] = problems
    print(json.dumps(summary, indent=2) if args.json_out else _report(run, comparison, config, problems, written, args))
    return EXIT_FAILED if problems else 0


def _start(franka: FrankaConfig, camera: str, spec: BoardSpec, *, sim: bool, approval: bool,
           sim_hosts: list[str] | None = None) -> FrankaRuntime:
    approval_channel = None
    if approval:
        from robots.franka.approval import CliApprovalChannel

        approval_channel = CliApprovalChannel()
    try:
        if not sim:
            return build_runtime(franka, approval=approval_channel)
        from robots.franka.calibration.sim_board import board_scene
        from robots.franka.sim.simulator import SimScene

        scene = SimScene() if len(franka.arms) == 1 else SimScene.dual()
        entry = next((c for c in franka.cameras if c.name == camera), None)
        arm_names = [a.name for a in franka.arms]
        arm_index = arm_names.index(entry.arm) if entry is not None and entry.arm in arm_names else 0
        scene = board_scene(scene, camera, spec, franka.arms[arm_index].home_joints_rad, arm_index)
        return build_runtime(franka, sim=True, scene=scene, approval=approval_channel, sim_hosts=sim_hosts)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _auto(ctx: Any, camera: Any, spec: BoardSpec, count: int, seed: int, speed_factor: float | None) -> list[CalibrationPose]:
    """Home first; the board must be in view there. Around it, `count` poses pivoting about the board
    (a wrist camera's, at the distance seen from home) or about the TCP (a board held by the hand)."""
    mount, arm_name = mount_of(camera, ctx.robot)
    arm_config = ctx.robot.arm_configs[arm_name]
    actions.home(ctx, [arm_name], speed_factor)
    frame = capture_frame(camera)
    if frame.intrinsics is None:
        raise CalibrationError(f"camera {camera.name!r}: no intrinsics (give `intrinsics` in its config entry)")
    try:
        view = BoardDetector(spec, frame.intrinsics).detect(frame.rgb)
    except BoardNotFound as exc:
        raise CalibrationError(f"home: board not visible from the home pose, where --auto starts: {exc}") from None
    pivot_m = float(np.linalg.norm(view.T_camera_board[:3, 3])) if mount == "wrist" else 0.0
    arm = ctx.robot.arm(arm_name)
    home = CalibrationPose("home", joints_rad=tuple(arm_config.home_joints_rad))
    return [home, *auto_poses(arm.state().pose, count, pivot_m, seed, accept=lambda pose: _in_workspace(arm, pose))]


def _in_workspace(arm: Any, pose: Any) -> bool:
    try:
        arm.envelope.check_pose(pose)
    except MotionRefused:
        return False
    return True


def _write(config: Path, target: Path, run: Any, franka: FrankaConfig) -> dict[str, Any]:
    """Into `target`: the config itself, or (a simulator calibration) its .sim file, started as a copy of it."""
    from robots.franka.calibration.config_edit import write_camera_transform

    fields: dict[str, Any] = {"mount": run.mount}
    if run.arm != franka.arms[0].name:
        fields["arm"] = run.arm
    assert run.result is not None
    source = target if target.exists() else config
    result = write_camera_transform(source, run.camera, run.key, run.result.transform, fields=fields, into=target)
    return {"written": str(result.path), "backup": str(result.backup) if result.backup else None,
            "comments_kept": result.comments_kept, "added_entry": result.added_entry}


def _report(run: Any, comparison: Comparison, config: Path, problems: list[str], written: dict[str, Any] | None,
            args: argparse.Namespace) -> str:
    r = run.result
    lines = [
        f"camera {run.camera} ({run.mount}, arm {run.arm}): {len(run.samples)} views, "
        f"{len(run.skipped)} of {len(run.samples) + len(run.skipped)} poses skipped, {run.elapsed_s:.1f} s",
        f"{run.key} =",
        *("  " + " ".join(f"{v:10.6f}" for v in row) for row in r.transform),
        f"reprojection error: {r.reprojection_rms_px:.3f} px RMS (worst view {r.reprojection_max_px:.3f} px; "
        f"limit {args.max_reprojection_px})",
        f"pose consistency: {r.consistency_mm:.2f} mm, {r.consistency_deg:.3f} deg RMS "
        f"(limits {args.max_consistency_mm} mm, {args.max_consistency_deg} deg)",
    ]
    lines += [f"skipped {s.label}: {s.reason}" for s in run.skipped]
    lines += report_lines(run, comparison, config, written, problems)
    return "\n".join(lines)


def _quietly_stop(runtime: FrankaRuntime) -> None:
    try:
        runtime.stop_all()
    except Exception as exc:
        log.warning("stopping the arms failed: %s", exc)
    runtime.close()
