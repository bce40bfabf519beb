"""`rpent calibrate --robot franka --sim`: hand-eye calibration in franky-sim recovers where the simulated
cameras really are, writes it into the deployment YAML, and names what went wrong when it cannot."""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import cv2
import mujoco
import numpy as np
import pytest
import yaml
from sim_process import free_sim_hosts

from robots.franka import kinematics
from robots.franka.calibration.config_edit import write_camera_transform
from robots.franka.calibration.poses import auto_poses
from robots.franka.config import CONFIG_DIR, HOME_JOINTS_RAD, load_franka_config
from robots.franka.sim.simulator import SimScene, scene_model
from robots.franka.sim.world import mujoco_camera_pose, wrist_camera_on_flange
from rpent.cli.main import main
from rpent.runtime.types import Pose, quat_from_matrix

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MAX_ERROR_MM = 5.0
MAX_ERROR_DEG = 0.5
HOME = kinematics.tcp_pose(HOME_JOINTS_RAD)


@pytest.fixture
def deployment(tmp_path: Path) -> Path:
    """A copy of the bundled single-arm config (with its comments and its flow-style `front` entry)."""
    for name in ("franka.yaml", "franka_safety.yaml"):
        shutil.copy(CONFIG_DIR / name, tmp_path / name)
    return tmp_path / "franka.yaml"


def _truth(camera: str) -> np.ndarray:
    """Where the simulated camera really is: T_base_camera (fixed) or T_flange_camera (wrist), from the model."""
    model, data = scene_model(SimScene())
    if camera == "wrist":
        return wrist_camera_on_flange(model, camera)[1]
    mujoco.mj_forward(model, data)
    return mujoco_camera_pose(data, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera))  # arm at the origin


def _errors(found: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    mm = float(np.linalg.norm(found[:3, 3] - truth[:3, 3])) * 1000.0
    deg = math.degrees(float(np.linalg.norm(cv2.Rodrigues(found[:3, :3] @ truth[:3, :3].T)[0])))
    return mm, deg


def _sim_hosts() -> str:
    """A free address of this file's own range for the simulated arm (127.0.0.100-119)."""
    return free_sim_hosts(100, 119)[0]


def _calibrate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict | None, str]:
    started = time.monotonic()
    code = main(["calibrate", "--robot", "franka", "--sim", "--sim-hosts", _sim_hosts(), "--speed-factor", "0.3",
                 "--json", *args])
    out, err = capsys.readouterr()
    summary = json.loads(out) if out.strip() else None
    if summary is not None:
        summary["wall_s"] = round(time.monotonic() - started, 1)
    return code, summary, err


def _pose_entry(name: str, pose: Pose) -> dict:
    return {"name": name, "position_m": list(pose.position), "quaternion_xyzw": list(pose.quaternion)}


def test_fixed_camera_is_found_within_5_mm_and_half_a_degree_and_written_to_a_simulator_file_only(
    deployment: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = deployment.read_text()
    code, summary, err = _calibrate(capsys, "--config", str(deployment), "--camera", "front", "--auto", "8", "--write")
    assert code == 0, err
    assert summary is not None and summary["mount"] == "fixed" and summary["problems"] == []
    found = np.asarray(summary["T_base_camera"])
    mm, deg = _errors(found, _truth("front"))
    print(f"\nfront (eye-to-hand): {mm:.2f} mm, {deg:.3f} deg from the truth; {summary['views']} views, "
          f"reprojection {summary['reprojection_rms_px']} px, consistency {summary['consistency_mm']} mm "
          f"{summary['consistency_deg']} deg, {summary['wall_s']} s")
    assert mm <= MAX_ERROR_MM and deg <= MAX_ERROR_DEG
    # The command's own comparison with the simulator's truth says the same.
    assert summary["truth_error_mm"] == pytest.approx(mm, abs=0.01)
    assert summary["truth_error_deg"] == pytest.approx(deg, abs=0.001)
    # A simulator calibration never goes into the hardware config: it goes into franka.sim.yaml beside it,
    # a copy of the config (comments and all) with the camera's entry set, read back by the config loader.
    assert deployment.read_text() == before
    sim_file = deployment.with_name("franka.sim.yaml")
    assert summary["written"] == str(sim_file) and summary["backup"] is None
    front = next(c for c in load_franka_config(sim_file).cameras if c.name == "front")
    assert np.allclose(front.transform(), found, atol=1e-6) and front.mount == "fixed"
    assert sim_file.read_text().startswith("# One Franka arm.") and summary["comments_kept"]
    assert sorted(p.name for p in deployment.parent.glob("franka.*yaml*")) == ["franka.sim.yaml", "franka.yaml"]


def test_the_report_names_the_file_the_entry_and_the_current_value_and_compares_with_the_simulators_truth(
    deployment: Path, tmp_path: Path
) -> None:
    """`rpent calibrate` in a terminal, without --write: what would change, and how far from the truth."""
    current = _truth("front").copy()
    current[0, 3] += 0.02  # an older calibration, 2 cm off along x
    write_camera_transform(deployment, "front", "T_base_camera", current)
    before = deployment.read_text()
    done = subprocess.run(
        [sys.executable, "-m", "rpent", "calibrate", "--robot", "franka", "--sim", "--sim-hosts", _sim_hosts(),
         "--speed-factor", "0.3",
         "--config", str(deployment), "--camera", "front", "--auto", "8"],
        capture_output=True, text=True, timeout=400, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    truth = next(line for line in lines if line.startswith("simulator truth: "))
    mm, deg = (float(v) for v in re.fullmatch(
        r"simulator truth: (\S+) mm, (\S+) deg from where the MuJoCo model has camera front", truth).groups())
    assert mm <= MAX_ERROR_MM and deg <= MAX_ERROR_DEG, truth
    at = lines.index(f"current T_base_camera of camera front in {deployment}:")
    assert np.allclose([[float(v) for v in row.split()] for row in lines[at + 1 : at + 5]], current, atol=1e-6)
    change = re.fullmatch(r"change from the current value: (\S+) mm, (\S+) deg", lines[at + 5])
    assert change and abs(float(change[1]) - 20.0) <= MAX_ERROR_MM, lines[at + 5]
    assert lines[-1] == (f"not written: pass --write to store it as T_base_camera of camera front in "
                         f"{deployment.with_name('franka.sim.yaml')} (a simulator calibration never goes into "
                         f"the hardware config {deployment})")
    assert deployment.read_text() == before and not deployment.with_name("franka.sim.yaml").exists()


def test_wrist_camera_is_found_on_the_flange_and_a_refused_pose_is_skipped(
    deployment: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    home = Pose(tuple(HOME[:3, 3]), quat_from_matrix(HOME[:3, :3]))  # type: ignore[arg-type]
    around = auto_poses(home, 8, pivot_m=0.45, seed=1)
    entries = [{"name": "home", "joints_rad": list(HOME_JOINTS_RAD)}]
    entries += [_pose_entry(p.label, p.tcp) for p in around[:4] if p.tcp]
    entries.append(_pose_entry("beyond_workspace", Pose((0.78, 0.0, 0.45), home.quaternion)))
    entries += [_pose_entry(p.label, p.tcp) for p in around[4:] if p.tcp]
    poses = tmp_path / "poses.yaml"
    poses.write_text(yaml.safe_dump(entries))

    with caplog.at_level(logging.WARNING, logger="rpent.calibrate"):
        code, summary, err = _calibrate(capsys, "--config", str(deployment), "--camera", "wrist", "--poses", str(poses), "--write")
    assert code == 0, err
    assert summary is not None and summary["mount"] == "wrist"
    refused = [s for s in summary["skipped"] if s["pose"] == "beyond_workspace"]
    assert refused and "the safety envelope refused it" in refused[0]["reason"] and "workspace_m.x" in refused[0]["reason"]
    assert any("beyond_workspace skipped: the safety envelope refused it" in r.getMessage() for r in caplog.records)
    found = np.asarray(summary["T_flange_camera"])
    mm, deg = _errors(found, _truth("wrist"))
    print(f"\nwrist (eye-in-hand): {mm:.2f} mm, {deg:.3f} deg from the truth; {summary['views']} views "
          f"({len(summary['skipped'])} skipped), reprojection {summary['reprojection_rms_px']} px, consistency "
          f"{summary['consistency_mm']} mm {summary['consistency_deg']} deg, {summary['wall_s']} s; skipped: "
          + "; ".join(f"{s['pose']}: {s['reason'][:90]}" for s in summary["skipped"]))
    assert mm <= MAX_ERROR_MM and deg <= MAX_ERROR_DEG
    assert summary["views"] >= 7
    wrist = next(c for c in load_franka_config(deployment.with_name("franka.sim.yaml")).cameras if c.name == "wrist")
    assert wrist.mount == "wrist" and np.allclose(wrist.transform(), found, atol=1e-6)


def test_a_board_out_of_view_is_named_and_too_few_views_write_nothing(
    deployment: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before = deployment.read_text()
    poses = tmp_path / "poses.yaml"
    poses.write_text(yaml.safe_dump([
        {"name": "home", "joints_rad": list(HOME_JOINTS_RAD)},
        # The hand 25 cm to the left, the camera turned 40 deg further left: the board is behind it.
        {"name": "looking_away", "position_m": [0.5, 0.25, 0.55], "rpy_rad": [math.pi + 0.7, 0.0, 0.0]},
    ]))  # fmt: skip
    code, summary, err = _calibrate(capsys, "--config", str(deployment), "--camera", "wrist", "--poses", str(poses), "--write")
    assert code == 1 and summary is None
    assert "views: 1 usable views, at least 5 needed" in err
    assert "looking_away: board not visible from this pose" in err
    assert deployment.read_text() == before
    assert sorted(p.name for p in deployment.parent.glob("franka.*yaml*")) == ["franka.yaml"]


def test_a_result_worse_than_the_limits_is_printed_but_not_written(
    deployment: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    before = deployment.read_text()
    home = Pose(tuple(HOME[:3, 3]), quat_from_matrix(HOME[:3, :3]))  # type: ignore[arg-type]
    entries = [{"name": "home", "joints_rad": list(HOME_JOINTS_RAD)}]
    entries += [_pose_entry(p.label, p.tcp) for p in auto_poses(home, 6, pivot_m=0.45, seed=2)[:6] if p.tcp]
    poses = tmp_path / "poses.yaml"
    poses.write_text(yaml.safe_dump(entries))
    code, summary, err = _calibrate(
        capsys, "--config", str(deployment), "--camera", "wrist", "--poses", str(poses), "--write",
        "--max-reprojection-px", "0.01",
    )  # fmt: skip
    assert code == 1, err
    assert summary is not None and "T_flange_camera" in summary and summary["written"] is None
    assert any(p.startswith("reprojection error ") and p.endswith("exceeds --max-reprojection-px 0.01")
               for p in summary["problems"]), summary["problems"]  # fmt: skip
    assert deployment.read_text() == before
    assert sorted(p.name for p in deployment.parent.glob("franka.*yaml*")) == ["franka.yaml"]
