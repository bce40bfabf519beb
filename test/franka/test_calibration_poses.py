"""The poses a calibration visits: a poses file is read or refused naming the entry; --auto spreads them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from robots.franka import kinematics
from robots.franka.calibration.handeye import MIN_ROTATION_SPREAD_DEG, rotation_spread_deg
from robots.franka.calibration.poses import AUTO_TILT_DEG, auto_poses, load_poses
from robots.franka.config import HOME_JOINTS_RAD
from rpent.runtime.types import Pose, quat_from_matrix

HOME = kinematics.tcp_pose(HOME_JOINTS_RAD)
HOME_POSE = Pose(tuple(HOME[:3, 3]), quat_from_matrix(HOME[:3, :3]))  # type: ignore[arg-type]


def test_a_poses_file_gives_joint_and_tcp_poses_with_their_names(tmp_path: Path) -> None:
    path = tmp_path / "poses.yaml"
    path.write_text(
        "poses:\n"
        "  - {name: start, joints_rad: [0, 0, 0, -1.57, 0, 1.57, 0.785]}\n"
        "  - {position_m: [0.5, 0.05, 0.45], rpy_rad: [3.0, 0.2, 0.1]}\n"
        "  - {name: q, position_m: [0.5, 0.0, 0.45], quaternion_xyzw: [1, 0, 0, 0]}\n"
    )
    poses = load_poses(path)
    assert [p.label for p in poses] == ["start", "pose 1", "q"]
    assert poses[0].joints_rad == (0, 0, 0, -1.57, 0, 1.57, 0.785) and poses[0].tcp is None
    assert poses[1].tcp is not None and np.allclose(poses[1].tcp.rpy, (3.0, 0.2, 0.1))
    assert poses[2].tcp is not None and np.allclose(poses[2].tcp.quaternion, (1, 0, 0, 0))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- {joints_rad: [0, 0, 0]}\n", r"entry 0: joints_rad: List should have at least 7 items"),
        ("- {joints_rad: [0, 0, 0, -1.5, 0, 1.5, 0]}\n- {joints_rad: [0, 0, 0, -1.5, 0, 1.5, 0], position_m: [0.5, 0, 0.4]}\n",
         r"entry 1: entry: Value error, give either joints_rad or position_m"),
        ("- {position_m: [0.5, 0, 0.4]}\n", r"entry 0: .*position_m needs exactly one of rpy_rad or quaternion_xyzw"),
        ("- {position_m: [0.5, 0, 0.4], rpy_rad: [3.1, 0, 0], speed: 2}\n", r"entry 0: speed: Extra inputs are not permitted"),
        ("{}\n", r"must hold a non-empty list of poses"),
        ("- [unclosed\n", r"cannot read"),
    ],
)
def test_a_bad_poses_file_is_refused_naming_the_entry_and_the_rule(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "poses.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"--poses: .*" + message):
        load_poses(path)


def test_auto_poses_tilt_the_hand_about_two_axes_around_a_pivot_deterministically() -> None:
    pivot_m = 0.45
    poses = auto_poses(HOME_POSE, 10, pivot_m, seed=3)
    assert [p.label for p in poses] == [f"auto {i}" for i in range(1, 11)]
    assert auto_poses(HOME_POSE, 10, pivot_m, seed=3) == poses
    assert auto_poses(HOME_POSE, 10, pivot_m, seed=4) != poses
    matrices = [HOME] + [kinematics.pose_matrix(p.tcp.position, p.tcp.quaternion) for p in poses if p.tcp]
    assert rotation_spread_deg(matrices) > 2 * MIN_ROTATION_SPREAD_DEG
    pivot = HOME[:3, 3] + HOME[:3, 2] * pivot_m
    for m in matrices[1:]:
        tilt = math.degrees(math.acos(np.clip(m[:3, 2] @ HOME[:3, 2], -1, 1)))
        assert AUTO_TILT_DEG[0] - 0.01 <= tilt <= AUTO_TILT_DEG[1] + 0.01
        # The approach axis still points (within the shifts) at the pivot, where the board is.
        along = m[:3, 3] + m[:3, 2] * ((pivot - m[:3, 3]) @ m[:3, 2])
        assert np.linalg.norm(along - pivot) < 0.1


def test_auto_poses_are_screened_and_replaced() -> None:
    poses = auto_poses(HOME_POSE, 6, 0.45, seed=0, accept=lambda pose: pose.position[1] > HOME[1, 3])
    assert len(poses) == 6
    assert all(p.tcp is not None and p.tcp.position[1] > HOME[1, 3] for p in poses)
    assert auto_poses(HOME_POSE, 6, 0.45, accept=lambda pose: False) == []
