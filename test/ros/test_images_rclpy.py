"""Camera images and observation images over DDS on loopback, read back through cv_bridge.

Skipped where rclpy, cv_bridge (with OpenCV's cv2) or the generated rpent interfaces cannot be
imported (CI has no ROS 2; run these in a sourced ROS 2 Jazzy workspace with cv_bridge built).
"""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("cv2", reason="cv2 not importable: cv_bridge needs OpenCV's Python module (pip opencv-python)")
cv_bridge = pytest.importorskip("cv_bridge", reason="cv_bridge not importable: build it into the sourced ROS 2 workspace")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")

from builtin_interfaces.msg import Time  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image  # noqa: E402

from rpent.tools.images import decode_png  # noqa: E402
from rpent_ros.image_msgs import frame_to_image_msg, image_msg_to_rgb  # noqa: E402
from rpent_ros.telemetry import CameraTelemetry  # noqa: E402
from rpent_ros.toolkit_client import RosToolkit  # noqa: E402
from rpent_ros.toolkit_node import ToolkitNode  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]


class Inbox:
    """Messages of one topic, with a bounded wait for the n-th one."""

    def __init__(self, node: Node, msg_type: type, topic: str) -> None:
        self.messages: list = []
        self._arrived = threading.Condition()
        self.subscription = node.create_subscription(msg_type, topic, self._receive, 10)

    def _receive(self, msg) -> None:
        with self._arrived:
            self.messages.append(msg)
            self._arrived.notify_all()

    def wait(self, count: int = 1, timeout_s: float = 30.0):
        with self._arrived:
            assert self._arrived.wait_for(lambda: len(self.messages) >= count, timeout_s), \
                f"{self.subscription.topic_name}: {len(self.messages)} of {count} messages within {timeout_s} s"
            return self.messages[count - 1]


def wait_matched(publisher, timeout_s: float = 30.0) -> None:
    """Discovery is asynchronous: a message published before the subscriber is matched is lost."""
    pause = threading.Event()
    for _ in range(int(timeout_s / 0.02)):
        if publisher.get_subscription_count() > 0:
            return
        pause.wait(0.02)
    raise AssertionError(f"{publisher.topic_name}: no subscriber matched within {timeout_s} s")


def test_camera_frame_round_trips_through_cv_bridge_with_its_camera_info(ros):
    camera_node = ros(Node("camera_under_test"))
    telemetry = CameraTelemetry(camera_node, "front", fovy_deg=60.0)
    viewer = ros(Node("viewer"))
    images = Inbox(viewer, Image, "/camera_under_test/front/image_raw")
    infos = Inbox(viewer, CameraInfo, "/camera_under_test/front/camera_info")
    wait_matched(telemetry.image)
    wait_matched(telemetry.info)
    rng = np.random.default_rng(7)
    colour = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    grey = rng.integers(0, 256, (48, 64), dtype=np.uint8)

    telemetry.publish(colour)
    telemetry.publish(grey)

    bridge = cv_bridge.CvBridge()
    image, info = images.wait(1), infos.wait(1)
    assert image.encoding == "rgb8" and (image.height, image.width, image.step) == (48, 64, 64 * 3)
    assert np.array_equal(bridge.imgmsg_to_cv2(image), colour)
    # A subscriber that works in OpenCV's BGR order gets the same pixels, channels swapped.
    assert np.array_equal(bridge.imgmsg_to_cv2(image, desired_encoding="bgr8"), colour[:, :, ::-1])
    assert image.header.frame_id == info.header.frame_id == "front"
    assert image.header.stamp == info.header.stamp
    focal = 24 / math.tan(math.radians(30))
    assert (info.height, info.width) == (48, 64)
    assert np.allclose(info.k, [focal, 0, 31.5, 0, focal, 23.5, 0, 0, 1])
    mono = images.wait(2)
    assert mono.encoding == "mono8" and mono.step == 64
    assert np.array_equal(bridge.imgmsg_to_cv2(mono), grey)


def test_any_8_bit_encoding_reads_back_as_rgb_pixels():
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    bridge = cv_bridge.CvBridge()
    bgr_msg = bridge.cv2_to_imgmsg(np.ascontiguousarray(rgb[:, :, ::-1]), encoding="bgr8")
    assert np.array_equal(image_msg_to_rgb(bgr_msg), rgb)
    grey_msg = frame_to_image_msg(rgb[:, :, 0], stamp=Time(sec=1), frame_id="cam")
    assert np.array_equal(image_msg_to_rgb(grey_msg), np.repeat(rgb[:, :, :1], 3, axis=2))
    depth_msg = bridge.cv2_to_imgmsg(np.zeros((5, 7), np.float32), encoding="32FC1")
    with pytest.raises(ValueError, match="image encoding '32FC1': cannot be shown as rgb8"):
        image_msg_to_rgb(depth_msg)


@pytest.mark.slow
def test_observation_images_on_the_toolkit_topic_are_the_captured_png_pixels(ros, tmp_path):
    toolkit = ros(ToolkitNode(parameter_overrides=[
        Parameter("robot", value="toy"), Parameter("output_dir", value=str(tmp_path / "node")),
    ]))
    viewer = ros(Node("viewer"))
    observations = Inbox(viewer, Image, "/toolkit/observation/image_0")
    wait_matched(toolkit.ros_events.images[0])
    remote = RosToolkit(ros(Node("test_client")), "/toolkit")
    remote.wait_ready(30)

    result = remote.execute_tool("move_to", {"x_m": 0.2, "y_m": 0.3})

    assert not result.is_error, result.error
    captured = decode_png(result.images[0])
    image = observations.wait(1)
    assert image.encoding == "rgb8" and image.header.frame_id == "camera"
    assert np.array_equal(cv_bridge.CvBridge().imgmsg_to_cv2(image), captured[:, :, :3])
