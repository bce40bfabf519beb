"""Keep-out zones in the envelope: targets and paths through a zone refused naming the zone, the link
and the waypoint; paths beside it accepted; policy steps and both arms of a dual cell held to them.
Pure geometry (no simulator): the checks the arm runs before franky sees a command. On the simulated
arm: test_keep_out_sim.py."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from zone_battery import HOME, box_around, cases, check

from robots.franka import kinematics
from robots.franka.keep_out import CHAIN_RADII_M, KeepOutZone, zone_points
from robots.franka.policy.step_safety import StepRefused, check_step, shape_step
from robots.franka.safety import SafetyEnvelope, load_safety_config
from robots.franka.safety_limits import ArmLimits
from rpent.runtime.arm import MotionRefused
from rpent.runtime.types import Pose

DOWN = (1.0, 0.0, 0.0, 0.0)
SHELF = {"name": "shelf", "box": {"x_m": [0.40, 0.60], "y_m": [0.20, 0.40], "z_m": [0.0, 0.45]}}
POST = {"name": "tripod", "cylinder": {"center_xy_m": [0.55, -0.15], "radius_m": 0.03, "z_m": [0.0, 1.2]}}


def zone(data: dict) -> KeepOutZone:
    return KeepOutZone.model_validate(data)


def test_battery_targets_and_paths_through_a_zone_are_refused_naming_zone_link_and_waypoint() -> None:
    refused: Counter[str] = Counter()
    for case in (c for c in cases() if c.refused):
        envelope = SafetyEnvelope(ArmLimits(), "arm", keep_out=[case.zone])
        with pytest.raises(MotionRefused) as info:
            check(envelope, case)
        limit = info.value.limit
        assert limit.endswith(".keep_out_m"), (case, limit)
        assert f"keep-out zone {case.zone.name!r}" in info.value.rule, info.value.rule
        # arm.<waypoint>.<link>.keep_out_m: the link or hand part that would enter.
        _, where, link, _ = limit.split(".")
        assert link in {"hand", "fingertip", "flange"} or link.startswith("link"), limit
        if case.kind == "across_path":
            assert where.startswith("path_to_"), (case, limit)  # on the way, not at the target
        assert info.value.value < envelope.limits.keep_out_margin_m
        refused[f"{case.kind}/{case.tool}"] += 1
    assert sum(refused.values()) >= 70, refused
    print("refused:", dict(refused))


def test_battery_paths_beside_a_zone_are_accepted() -> None:
    beside = [c for c in cases() if not c.refused]
    assert len(beside) >= 30
    for case in beside:
        check(SafetyEnvelope(ArmLimits(), "arm", keep_out=[case.zone]), case)


def test_nothing_of_a_zone_may_come_between_the_open_fingers() -> None:
    # A 2 cm rod standing on the table, the hand lowered over it with its fingers open either side:
    # the fingers would straddle it, but the hand is solid to a zone (a grasp of it is a touch).
    envelope = SafetyEnvelope(ArmLimits(), "arm", keep_out=[zone(
        {"name": "rod", "cylinder": {"center_xy_m": [0.5, 0.0], "radius_m": 0.01, "z_m": [0.2, 0.30]}})])
    with pytest.raises(MotionRefused, match=r"keep-out zone 'rod'"):
        envelope.check_cartesian_motion(HOME, [Pose((0.5, 0.0, 0.30), DOWN)])
    envelope.check_cartesian_motion(HOME, [Pose((0.5, 0.0, 0.40), DOWN)])


def test_signed_distance_of_boxes_and_cylinders() -> None:
    box, post = zone(SHELF), zone(POST)
    points = np.array([[0.5, 0.3, 0.2], [0.5, 0.5, 0.2], [0.7, 0.5, 0.55]])
    assert np.allclose(box.signed_distance(points), [-0.1, 0.1, math.sqrt(0.1**2 + 0.1**2 + 0.1**2)])
    points = np.array([[0.55, -0.15, 0.6], [0.65, -0.15, 0.6], [0.55, -0.15, 1.3]])
    assert np.allclose(post.signed_distance(points), [-0.03, 0.07, 0.1])


def test_a_zone_for_one_arm_holds_that_arm_only_and_the_config_names_each_zone(tmp_path: Path) -> None:
    path = tmp_path / "safety.yaml"
    path.write_text(
        "keep_out:\n"
        "  - {name: shelf, box: {x_m: [0.40, 0.60], y_m: [0.20, 0.40], z_m: [0.0, 0.45]}, arms: [left]}\n"
        "  - {name: tripod, cylinder: {center_xy_m: [0.55, -0.15], radius_m: 0.03, z_m: [0.0, 1.2]}}\n"
    )
    config = load_safety_config(path)
    left, right = config.envelope("left", (0.0, 0.25, 0.0)), config.envelope("right", (0.0, -0.25, 0.0))
    assert [z.name for z in left.keep_out] == ["shelf", "tripod"]
    assert [z.name for z in right.keep_out] == ["tripod"]
    # World (0.5, 0.30, 0.40), inside the shelf: refused for the left arm; the right arm, were it standing
    # where the left one does, would be let through (the shelf is not its zone).
    with pytest.raises(MotionRefused, match=r"^refused: left\..*keep_out_m = .* keep-out zone 'shelf'"):
        left.check_cartesian_motion(HOME, [Pose((0.5, 0.05, 0.40), DOWN)])
    right_in_left_s_place = SafetyEnvelope(ArmLimits(), "right", base_xyz_m=(0.0, 0.25, 0.0), keep_out=config.keep_out)
    right_in_left_s_place.check_cartesian_motion(HOME, [Pose((0.5, 0.05, 0.40), DOWN)])
    # The zone for every arm holds the right arm too: the tripod at world y -0.15 is y +0.10 in its frame.
    with pytest.raises(MotionRefused, match=r"keep-out zone 'tripod'"):
        right.check_cartesian_motion(HOME, [Pose((0.55, 0.10, 0.40), DOWN)])


@pytest.mark.parametrize(
    ("zones", "message"),
    [
        ("[{name: a, box: {x_m: [0, 1], y_m: [0, 1], z_m: [0, 1]}, cylinder: {center_xy_m: [0, 0], radius_m: 1, z_m: [0, 1]}}]",
         "keep_out zone 'a': give exactly one of box or cylinder"),
        ("[{name: a}]", "keep_out zone 'a': give exactly one of box or cylinder"),
        ("[{name: a, box: {x_m: [1, 0], y_m: [0, 1], z_m: [0, 1]}}]", "box.x_m: lower bound 1.0 must be below upper bound 0.0"),
        ("[{name: a, cylinder: {center_xy_m: [0, 0], radius_m: -1, z_m: [0, 1]}}]", "radius_m"),
        ("[{name: 'a b', box: {x_m: [0, 1], y_m: [0, 1], z_m: [0, 1]}}]", "zone name 'a b'"),
        ("[{name: a, box: {x_m: [0, 1], y_m: [0, 1], z_m: [0, 1]}}, {name: a, box: {x_m: [0, 1], y_m: [0, 1], z_m: [0, 1]}}]",
         "zone name 'a' is used twice"),
        ("[{name: a, sphere: {r: 1}}]", "sphere"),
    ],
)
def test_a_bad_zone_is_refused_when_the_file_is_read_naming_it(tmp_path: Path, zones: str, message: str) -> None:
    path = tmp_path / "safety.yaml"
    path.write_text(f"keep_out: {zones}\n")
    with pytest.raises(ValueError) as info:
        load_safety_config(path)
    assert message in str(info.value)
    assert str(path) in str(info.value) and "keep_out" in str(info.value)


def test_an_arm_that_starts_too_close_may_move_away_but_not_closer() -> None:
    start_tcp = kinematics.tcp_pose(HOME)[:3, 3]
    near = box_around("beside_the_hand", start_tcp + np.array([0.0, 0.13, 0.0]))  # within the margin of the hand
    envelope = SafetyEnvelope(ArmLimits(), "arm", keep_out=[near])
    envelope.check_cartesian_motion(HOME, [Pose(tuple(start_tcp + np.array([0.0, -0.08, 0.0])), DOWN)])
    with pytest.raises(MotionRefused, match="beside_the_hand"):
        envelope.check_cartesian_motion(HOME, [Pose(tuple(start_tcp + np.array([0.0, 0.06, 0.0])), DOWN)])


def test_a_policy_step_into_a_zone_is_refused_and_one_beside_it_runs() -> None:
    period = 1 / 15
    step_to = HOME.copy()
    step_to[0] += 0.06  # joint 1 at 0.9 rad/s: the hand swings sideways 3 cm
    shaped = shape_step(SafetyEnvelope(ArmLimits(), "arm"), HOME, step_to, period)
    start, swung = kinematics.tcp_pose(HOME)[:3, 3], kinematics.tcp_pose(shaped.target)[:3, 3]
    ahead = box_around("in_the_way", swung + 0.13 * (swung - start) / np.linalg.norm(swung - start))
    gaps = ahead.signed_distance(zone_points(kinematics.joint_frames(HOME[None])))[0] - CHAIN_RADII_M
    assert gaps.min() > ArmLimits().keep_out_margin_m  # clear where the step starts
    in_the_way = SafetyEnvelope(ArmLimits(), "arm", keep_out=[ahead])
    with pytest.raises(StepRefused) as info:
        check_step(in_the_way, HOME, np.zeros(7), shaped, period, 7, brake=(4.0, 2000.0))
    assert info.value.step == 7 and "keep-out zone 'in_the_way'" in info.value.rule
    elsewhere = SafetyEnvelope(ArmLimits(), "arm", keep_out=[box_around("elsewhere", swung - np.array([0.0, 0.0, 0.2]))])
    check_step(elsewhere, HOME, np.zeros(7), shaped, period, 7, brake=(4.0, 2000.0))


def test_the_shipped_safety_file_has_a_zone_a_lab_can_copy_and_it_holds_every_arm() -> None:
    from robots.franka.config import DEFAULT_SAFETY_FILE

    config = load_safety_config(DEFAULT_SAFETY_FILE)
    assert config.keep_out, "config/franka_safety.yaml ships no keep-out zone"
    for arm in ("arm", "left", "right"):
        assert [z.name for z in config.envelope(arm).keep_out] == [z.name for z in config.keep_out]
