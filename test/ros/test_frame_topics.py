"""Which image topic feeds each dashboard camera view of dashboard_node (no rclpy needed)."""

from __future__ import annotations

import pytest

from rpent.robot import ConfigError
from rpent_ros.params import frame_topics


def test_views_come_from_the_cameras_node_topics_when_cameras_run_in_their_own_node():
    assert frame_topics(["front", "top"], [], "/toolkit", "franka_sim") == {
        "front": "/franka_sim/front/image_raw", "top": "/franka_sim/top/image_raw"}


def test_without_a_cameras_node_views_are_the_toolkit_nodes_observation_images_in_order():
    assert frame_topics(["front", "top"], [], "/robot1/toolkit/", "") == {
        "front": "/robot1/toolkit/observation/image_0", "top": "/robot1/toolkit/observation/image_1"}


def test_explicit_entries_override_one_channel_and_leave_the_others_on_the_default():
    topics = frame_topics(["front", "top"], ["top=/ceiling/color/image_raw"], "/toolkit", "franka_sim")
    assert topics == {"front": "/franka_sim/front/image_raw", "top": "/ceiling/color/image_raw"}


@pytest.mark.parametrize(("entry", "rule"), [
    ("top", "must look like 'channel=/topic'"),
    ("=/x", "must look like 'channel=/topic'"),
    ("side=/x", "unknown frame channel 'side'"),
])
def test_a_bad_entry_is_refused_naming_the_parameter_and_the_rule(entry, rule):
    with pytest.raises(ConfigError, match="parameter frame_topics") as error:
        frame_topics(["front", "top"], [entry], "/toolkit", "")
    assert rule in str(error.value)
