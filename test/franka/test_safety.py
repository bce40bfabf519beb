"""The safety envelope refuses out-of-limit commands, naming the limit and the value."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from robots.franka.config import DEFAULT_SAFETY_FILE, HOME_JOINTS_RAD, load_franka_config
from robots.franka.safety import SafetyEnvelope, load_safety_config
from robots.franka.safety_limits import ArmLimits
from rpent.runtime.arm import MotionRefused
from rpent.runtime.types import Pose

DOWN = (1.0, 0.0, 0.0, 0.0)


@pytest.fixture
def envelope() -> SafetyEnvelope:
    return SafetyEnvelope(ArmLimits(), arm_name="left")


def test_pose_inside_workspace_passes(envelope: SafetyEnvelope) -> None:
    envelope.check_pose(Pose((0.5, 0.0, 0.3), DOWN))


@pytest.mark.parametrize(
    ("position", "limit", "value"),
    [
        ((0.9, 0.0, 0.3), "left.target.x_m", 0.9),
        ((0.5, -0.5, 0.3), "left.target.y_m", -0.5),
        ((0.5, 0.0, 0.05), "left.target.z_m", 0.05),
    ],
)
def test_pose_outside_workspace_is_refused_naming_axis_and_value(envelope, position, limit, value) -> None:
    with pytest.raises(MotionRefused) as info:
        envelope.check_pose(Pose(position, DOWN))
    assert info.value.limit == limit
    assert info.value.value == value
    assert "workspace_m" in str(info.value) and "did not move" in str(info.value)


def test_unreachable_corner_is_refused_by_reach() -> None:
    wide = SafetyEnvelope(ArmLimits(workspace_m={"x": (0.0, 1.0), "y": (-1.0, 1.0), "z": (0.0, 1.0)}), "arm")
    with pytest.raises(MotionRefused, match=r"reach_m = .* max_reach_m 0.8"):
        wide.check_pose(Pose((0.8, 0.5, 0.1), DOWN))


def test_long_relative_step_is_refused(envelope: SafetyEnvelope) -> None:
    start = Pose((0.5, 0.0, 0.3), DOWN)
    envelope.check_step(start, start.translated((0.0, 0.0, 0.1)))
    with pytest.raises(MotionRefused, match=r"left\.step\.length_m = 0\.15 violates max_step_m 0\.1"):
        envelope.check_step(start, start.translated((0.0, 0.15, 0.0)))


def test_large_rotation_step_is_refused(envelope: SafetyEnvelope) -> None:
    start = Pose((0.5, 0.0, 0.3), DOWN)
    turned = start.rotated((0.0, 0.0, math.sin(0.5), math.cos(0.5)))  # 1 rad about z
    with pytest.raises(MotionRefused, match="max_rotation_step_rad"):
        envelope.check_step(start, turned)


def test_joint_targets_keep_a_margin_from_the_limits(envelope: SafetyEnvelope) -> None:
    envelope.check_joints(HOME_JOINTS_RAD)
    near_limit = list(HOME_JOINTS_RAD)
    near_limit[3] = -0.2  # joint 4 upper limit -0.1518, margin 0.1
    with pytest.raises(MotionRefused) as info:
        envelope.check_joints(near_limit)
    assert info.value.limit == "left.joints[3]_rad"
    assert "margin 0.1" in str(info.value)


def test_joint_vector_of_wrong_length_is_refused(envelope: SafetyEnvelope) -> None:
    with pytest.raises(MotionRefused, match="exactly 7 joint values"):
        envelope.check_joints([0.0] * 6)


def test_speed_factor_defaults_and_is_capped(envelope: SafetyEnvelope) -> None:
    assert envelope.speed_factor(None) == 0.2
    assert envelope.speed_factor(0.3) == 0.3
    with pytest.raises(MotionRefused, match=r"speed_factor = 0\.9 violates .*max_speed_factor 0\.3"):
        envelope.speed_factor(0.9)
    with pytest.raises(MotionRefused):
        envelope.speed_factor(0.0)


def test_gripper_force_is_capped(envelope: SafetyEnvelope) -> None:
    envelope.check_gripper(width_m=0.0, force_n=40.0)
    with pytest.raises(MotionRefused, match=r"gripper_force_n = 80\.0 violates .*max_gripper_force_n 40\.0"):
        envelope.check_gripper(force_n=80.0)
    with pytest.raises(MotionRefused, match="gripper_width_m"):
        envelope.check_gripper(width_m=0.09)


def test_bundled_safety_file_is_the_conservative_default() -> None:
    config = load_safety_config(DEFAULT_SAFETY_FILE)
    assert config.default == ArmLimits()


def test_per_arm_override_merges_over_defaults(tmp_path: Path) -> None:
    path = tmp_path / "safety.yaml"
    path.write_text("default:\n  max_step_m: 0.05\narms:\n  right:\n    max_gripper_force_n: 20\n")
    config = load_safety_config(path)
    right = config.limits_for("right")
    assert (right.max_step_m, right.max_gripper_force_n) == (0.05, 20.0)
    assert config.limits_for("left").max_gripper_force_n == 40.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("default:\n  max_speed_factor: 1.5\n", "max_speed_factor"),
        ("default:\n  workspace_m: {x: [0.7, 0.3]}\n", "workspace_m.x"),
        ("default:\n  max_stepp_m: 0.1\n", "max_stepp_m"),
        ("arms:\n  left:\n    max_gripper_force_n: 500\n", "arms.left"),
    ],
)
def test_bad_safety_file_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "safety.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_safety_config(path).limits_for("left")


def test_deployment_configs_load_with_their_safety_file() -> None:
    root = Path(__file__).resolve().parents[2] / "config"
    single = load_franka_config(root / "franka.yaml")
    dual = load_franka_config(root / "franka_dual.yaml")
    assert [a.name for a in single.arms] == ["arm"]
    assert [a.name for a in dual.arms] == ["left", "right"]
    assert dual.safety().limits_for("left") == ArmLimits()
