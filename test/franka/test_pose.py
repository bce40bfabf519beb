"""Pose, quaternion and rpy helpers of rpent.runtime.types."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rpent.runtime.types import Pose, quat_angle, quat_from_rpy, rpy_from_quat

angles = st.floats(min_value=-math.pi + 1e-3, max_value=math.pi - 1e-3)
pitches = st.floats(min_value=-math.pi / 2 + 1e-2, max_value=math.pi / 2 - 1e-2)


def test_gripper_pointing_down_is_a_half_turn_about_x() -> None:
    q = quat_from_rpy(math.pi, 0.0, 0.0)
    assert q == pytest.approx((1.0, 0.0, 0.0, 0.0), abs=1e-12)


def test_yaw_quarter_turn_matches_known_quaternion() -> None:
    q = quat_from_rpy(0.0, 0.0, math.pi / 2)
    assert q == pytest.approx((0.0, 0.0, math.sqrt(0.5), math.sqrt(0.5)), abs=1e-12)


@given(angles, pitches, angles)
def test_rpy_round_trips_through_quaternion(roll: float, pitch: float, yaw: float) -> None:
    q = quat_from_rpy(roll, pitch, yaw)
    assert quat_angle(q, quat_from_rpy(*rpy_from_quat(q))) < 1e-6


@given(angles, pitches, angles)
def test_negated_quaternion_is_the_same_pose(roll: float, pitch: float, yaw: float) -> None:
    q = quat_from_rpy(roll, pitch, yaw)
    a = Pose((0.1, 0.2, 0.3), q)
    b = Pose((0.1, 0.2, 0.3), tuple(-c for c in q))
    assert a == b


def test_near_zero_w_does_not_flip_sign_on_noise() -> None:
    # franky reports "pointing down" as [1, 0, 0, -2e-8]; the model should read [1, 0, 0, 0].
    pose = Pose((0.5, 0.0, 0.4), (1.0, 0.0002, 0.0, -2e-8))
    assert pose.quaternion[0] > 0.99


def test_quaternion_is_normalised() -> None:
    pose = Pose((0, 0, 0), (0.0, 0.0, 0.0, 2.0))
    assert pose.quaternion == (0.0, 0.0, 0.0, 1.0)


@pytest.mark.parametrize(
    ("position", "quaternion", "message"),
    [
        ((0.0, 0.0), (0, 0, 0, 1), "position must have 3 components"),
        ((0.0, math.nan, 0.0), (0, 0, 0, 1), "position must be finite"),
        ((0.0, 0.0, 0.0), (0, 0, 0, 0), "quaternion must be finite and non-zero"),
        ((0.0, 0.0, 0.0), (0, 0, 1), "quaternion must have 4 components"),
    ],
)
def test_invalid_pose_is_rejected_naming_the_field(position, quaternion, message) -> None:
    with pytest.raises(ValueError, match=message):
        Pose(position, quaternion)


def test_translated_and_rotated_compose_in_the_base_frame() -> None:
    start = Pose.from_rpy((0.5, 0.0, 0.4), (math.pi, 0.0, 0.0))
    moved = start.translated((0.0, 0.1, -0.05)).rotated(quat_from_rpy(0.0, 0.0, math.pi / 2))
    assert moved.position == pytest.approx((0.5, 0.1, 0.35))
    roll, pitch, yaw = moved.rpy
    assert (abs(roll), pitch, yaw) == pytest.approx((math.pi, 0.0, math.pi / 2), abs=1e-9)
    assert start.angle_to(moved) == pytest.approx(math.pi / 2)


def test_pose_dict_round_trip() -> None:
    pose = Pose.from_rpy((0.4, -0.1, 0.3), (math.pi, 0.1, 0.2))
    again = Pose.from_dict(pose.to_dict())
    assert again.distance_to(pose) < 1e-6
    assert again.angle_to(pose) < 1e-5
    assert Pose.from_dict({"position": [0.4, -0.1, 0.3], "rpy": [math.pi, 0.1, 0.2]}).angle_to(pose) < 1e-9
