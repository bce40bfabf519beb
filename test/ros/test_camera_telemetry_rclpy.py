"""The toolkit node with its cameras in process (franka.launch.py): with camera_rate_hz it publishes the
camera topics franka.rviz shows (points, depth, CameraInfo) and the cameras' frames in TF, under the
arm frames it publishes itself; without, none.

Skipped where rclpy, the generated rpent interfaces or franky-sim cannot be imported.
"""

from __future__ import annotations

import threading

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
pytest.importorskip("franky_sim", reason="franky-sim is not installed (pip install rpent[sim])")

from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, PointCloud2  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from rpent_ros.runtime.telemetry import TF_STATIC_LISTENER  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(180)]


class Seen:
    """Topics that delivered a message, and the parent of every TF child frame."""

    def __init__(self, node: Node, topics: dict[str, type]) -> None:
        self.changed = threading.Condition()
        self.topics: set[str] = set()
        self.parents: dict[str, str] = {}
        for topic, kind in topics.items():
            node.create_subscription(kind, topic, lambda _m, t=topic: self._saw(t), 2)
        node.create_subscription(TFMessage, "/tf_static", self._tf, TF_STATIC_LISTENER)
        node.create_subscription(TFMessage, "/tf", self._tf, 100)

    def _saw(self, topic: str) -> None:
        with self.changed:
            self.topics.add(topic)
            self.changed.notify_all()

    def _tf(self, msg: TFMessage) -> None:
        with self.changed:
            self.parents.update((t.child_frame_id, t.header.frame_id) for t in msg.transforms)
            self.changed.notify_all()

    def wait_for(self, condition, what: str, timeout_s: float = 120.0) -> None:
        # A bound, not a pace: under CI load the sim arm, three rendered cameras and DDS discovery can
        # take tens of seconds to come up; the message says what never arrived.
        with self.changed:
            assert self.changed.wait_for(condition, timeout_s), (
                f"timed out after {timeout_s:.0f} s waiting for {what}: topics seen {sorted(self.topics)}, "
                f"TF child -> parent {dict(sorted(self.parents.items()))}")


def test_in_process_cameras_publish_points_depth_and_frames_on_request(ros, franka_sim_toolkit, tmp_path):
    franka_sim_toolkit(tmp_path / "run", camera_rate_hz=2.0)
    topics = {f"/toolkit/{c}/{s}": kind for c in ("front", "top", "wrist")
              for s, kind in (("points", PointCloud2), ("depth/image_raw", Image), ("camera_info", CameraInfo))}
    seen = Seen(ros(Node("rviz_stand_in")), topics)
    seen.wait_for(lambda: set(topics) <= seen.topics and {"front_optical_frame", "top_optical_frame", "wrist_optical_frame", "arm_link8"}
                  <= set(seen.parents), "every camera's topics and frames")
    assert seen.parents["front_optical_frame"] == seen.parents["top_optical_frame"] == "arm_link0"
    assert seen.parents["wrist_optical_frame"] == "arm_link8"


def test_without_camera_rate_the_toolkit_node_publishes_no_camera_topics(franka_sim_toolkit, tmp_path):
    toolkit = franka_sim_toolkit(tmp_path / "run")
    published = {publisher.topic_name for publisher in toolkit.publishers}  # this node's own, not DDS discovery
    assert "/joint_states" in published  # the arm telemetry it does publish is listed
    assert not [t for t in published if t.endswith(("/points", "/depth/image_raw"))], sorted(published)
