"""One envelope for every motion: targets and paths, links above the table, the hand pointing down,
two arms apart. Pure geometry (no simulator): the same checks the arm runs before franky sees a command."""

from __future__ import annotations

import math

import numpy as np
import pytest
from battery import Command, must_accept, must_refuse

from robots.franka import kinematics
from robots.franka.arm_clearance import check_arm_clearance
from robots.franka.config import HOME_JOINTS_RAD
from robots.franka.safety import SafetyEnvelope
from robots.franka.safety_limits import ArmLimits
from rpent.runtime.arm import MotionRefused
from rpent.runtime.types import Pose

HOME = np.asarray(HOME_JOINTS_RAD)
DOWN = (1.0, 0.0, 0.0, 0.0)
ISSUE_POSE = [0.6339, 0.8796, -0.4744, -1.991, -0.5429, 1.7503, 0.7582]


@pytest.fixture
def envelope() -> SafetyEnvelope:
    return SafetyEnvelope(ArmLimits(), "arm")


def _check(envelope: SafetyEnvelope, start: np.ndarray, command: Command) -> np.ndarray:
    """What the Franka tools ask of the envelope for this command (orientation kept where not given)."""
    args = command.arguments
    if command.tool == "move_joints":
        return envelope.check_joint_motion(start, [args["joints_rad"]])
    current = envelope.tcp_pose(start)
    rpy = [args.get(k) for k in ("roll_rad", "pitch_rad", "yaw_rad")]
    target = Pose.from_rpy([args["x_m"], args["y_m"], args["z_m"]],
                           [c if a is None else a for a, c in zip(rpy, current.rpy, strict=True)])
    return envelope.check_cartesian_motion(start, [target])


def test_the_reported_joint_pose_under_the_table_is_refused_naming_the_limit(envelope: SafetyEnvelope) -> None:
    tcp_z = kinematics.tcp_pose(ISSUE_POSE)[2, 3]
    assert tcp_z < 0.1  # the finding: this pose puts the hand near z = 0.04
    with pytest.raises(MotionRefused) as info:
        envelope.check_joint_motion(HOME, [ISSUE_POSE])
    assert info.value.limit.startswith("arm.")
    assert "did not move" in str(info.value)


def test_home_from_anywhere_safe_is_checked_like_any_joint_motion(envelope: SafetyEnvelope) -> None:
    path = envelope.check_joint_motion(HOME + 0.2, [HOME])
    assert len(path) >= 4  # sampled every 0.05 rad, not just the end points
    assert np.allclose(path[-1], HOME)


def test_hand_flipped_up_is_refused_by_the_tilt_cone(envelope: SafetyEnvelope) -> None:
    with pytest.raises(MotionRefused, match=r"arm\.target\.tilt_deg = 180\.0 violates max_tilt_deg 60"):
        envelope.check_cartesian_motion(HOME, [Pose.from_rpy((0.5, 0.0, 0.25), (0.0, 0.0, 0.0))])


def test_tilted_within_the_cone_is_accepted_and_beyond_it_refused(envelope: SafetyEnvelope) -> None:
    envelope.check_cartesian_motion(HOME, [Pose.from_rpy((0.5, 0.0, 0.35), (math.pi - math.radians(50), 0, 0))])
    with pytest.raises(MotionRefused, match=r"tilt_deg = 65\.0"):
        envelope.check_cartesian_motion(HOME, [Pose.from_rpy((0.5, 0.0, 0.35), (math.pi - math.radians(65), 0, 0))])


def test_tilted_hand_whose_body_would_touch_the_table_is_refused(envelope: SafetyEnvelope) -> None:
    # Fingertips at the workspace floor, the hand turned 55 degrees about its finger axis: the hand's
    # 20 cm wide body reaches below the table top although the TCP does not.
    target = Pose.from_rpy((0.5, 0.0, 0.215), (math.pi, math.radians(55), 0.0))
    with pytest.raises(MotionRefused, match=r"\.hand\.z_m = .* violates table at z 0\.2"):
        envelope.check_cartesian_motion(HOME, [target])


def test_unreachable_target_is_refused_before_it_is_sent(envelope: SafetyEnvelope) -> None:
    # The finding: this target "ended" 11 cm away; no configuration of the arm reaches it pointing down.
    with pytest.raises(MotionRefused, match=r"reachable_m = .*inverse kinematics"):
        envelope.check_cartesian_motion(HOME, [Pose((0.65, 0.29, 0.60), DOWN)])


def test_a_path_refusal_names_the_waypoint_and_how_far_along(envelope: SafetyEnvelope) -> None:
    _, dips = must_refuse()
    start, command = dips[0]
    with pytest.raises(MotionRefused) as info:
        _check(envelope, np.asarray(start), command)
    assert "path_to_joints_at_" in info.value.limit


def test_a_path_that_starts_outside_the_box_may_come_back_in(envelope: SafetyEnvelope) -> None:
    # An arm switched on with its hand above the box is allowed home; going further out is not.
    high = HOME.copy()
    high[3] = -1.2
    assert kinematics.tcp_pose(high)[2, 3] > envelope.limits.workspace_m.z[1]
    envelope.check_joint_motion(high, [HOME])
    higher = high.copy()
    higher[3] = -0.9
    with pytest.raises(MotionRefused):
        envelope.check_joint_motion(high, [higher])


def test_battery_every_must_refuse_command_is_refused(envelope: SafetyEnvelope) -> None:
    from_home, dips = must_refuse()
    left = SafetyEnvelope(ArmLimits(), "left", base_xyz_m=(0.0, 0.25, 0.0))
    right = SafetyEnvelope(ArmLimits(), "right", base_xyz_m=(0.0, -0.25, 0.0))
    refused: dict[str, int] = {}
    cases = [(HOME, c) for c in from_home] + [(np.asarray(s), c) for s, c in dips]
    for start, command in cases:
        try:
            if command.robot == "dual_franka":
                mover, other = (left, right) if command.arguments["arm"] == "left" else (right, left)
                path = _check(mover, start, command)
                check_arm_clearance([(mover, path), (other, HOME[None])])
            else:
                _check(envelope, start, command)
        except (MotionRefused, ValueError):  # ValueError: a non-finite pose cannot even be built
            refused[command.kind] = refused.get(command.kind, 0) + 1
        else:
            pytest.fail(f"accepted a must-refuse command: {command}")
    assert sum(refused.values()) == len(cases) >= 100
    print("refused by kind:", refused)


def test_battery_every_safe_command_is_accepted(envelope: SafetyEnvelope) -> None:
    for command in must_accept():
        _check(envelope, HOME, command)


def test_arms_apart_are_accepted_and_arms_too_close_refused() -> None:
    left = SafetyEnvelope(ArmLimits(), "left", base_xyz_m=(0.0, 0.25, 0.0))
    right = SafetyEnvelope(ArmLimits(), "right", base_xyz_m=(0.0, -0.25, 0.0))
    check_arm_clearance([(left, HOME[None]), (right, HOME[None])])
    reach_over = left.check_cartesian_motion(HOME, [Pose((0.55, -0.27, 0.45), DOWN)])
    with pytest.raises(MotionRefused, match=r"left\+right\.path\.arm_distance_m = .* min_arm_distance_m 0\.1"):
        check_arm_clearance([(left, reach_over), (right, HOME[None])])


def test_fr3_chain_matches_the_urdf_franky_sim_ships() -> None:
    description = pytest.importorskip("robots.franka.ros.description", reason="franky-sim's URDF is needed")
    try:
        arm = description.load_arm_description("fr3")
    except description.UrdfError as exc:
        pytest.skip(f"no FR3 URDF: {exc}")
    rng = np.random.default_rng(3)
    for _ in range(50):
        q = rng.uniform(kinematics_lower(), kinematics_upper())
        urdf = arm.link_pose("fr3_hand_tcp", arm.joint_positions(q))
        assert np.allclose(urdf, kinematics.tcp_pose(q), atol=1e-9)


def kinematics_lower() -> np.ndarray:
    return np.asarray(ArmLimits().joint_lower_rad)


def kinematics_upper() -> np.ndarray:
    return np.asarray(ArmLimits().joint_upper_rad)
