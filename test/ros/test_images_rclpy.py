"""Camera images and observation images over DDS on loopback, read back through cv_bridge.

Skipped where rclpy, cv_bridge (with OpenCV's cv2) or the generated rpent interfaces cannot be
imported (CI has no ROS 2; run these in a sourced ROS 2 Jazzy workspace with cv_bridge built).
"""

from __future__ import annotations

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
from rclpy.qos import QoSProfile  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, PointCloud2  # noqa: E402
from sensor_msgs_py.point_cloud2 import read_points_numpy  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robots.franka.camera_mount import CameraMount  # noqa: E402
from rpent.runtime.camera import CameraFrame, Intrinsics  # noqa: E402
from rpent.tools.images import decode_png  # noqa: E402
from rpent_ros.runtime.image_msgs import frame_to_image_msg, image_msg_to_rgb  # noqa: E402
from rpent_ros.runtime.telemetry import TF_STATIC_LISTENER, CameraTelemetry  # noqa: E402
from rpent_ros.toolkit.client import RosToolkit  # noqa: E402
from rpent_ros.toolkit.toolkit_node import ToolkitNode  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]


class Inbox:
    """Messages of one topic, with a bounded wait for the n-th one."""

    def __init__(self, node: Node, msg_type: type, topic: str, qos: QoSProfile | int = 10) -> None:
        self.messages: list = []
        self._arrived = threading.Condition()
        self.subscription = node.create_subscription(msg_type, topic, self._receive, qos)

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
    telemetry = CameraTelemetry(camera_node, "front")
    viewer = ros(Node("viewer"))
    images = Inbox(viewer, Image, "/camera_under_test/front/image_raw")
    infos = Inbox(viewer, CameraInfo, "/camera_under_test/front/camera_info")
    wait_matched(telemetry.image)
    wait_matched(telemetry.info)
    rng = np.random.default_rng(7)
    colour = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    grey = rng.integers(0, 256, (48, 64), dtype=np.uint8)
    k = Intrinsics(64, 48, 41.5, 42.0, 31.5, 23.5, (0.1, -0.05, 0.0, 0.0, 0.01))

    telemetry.publish(CameraFrame("front", colour, intrinsics=k, stamp_s=1700000000.5))
    telemetry.publish(CameraFrame("front", grey))  # an uncalibrated grey camera

    bridge = cv_bridge.CvBridge()
    image, info = images.wait(1), infos.wait(1)
    assert image.encoding == "rgb8" and (image.height, image.width, image.step) == (48, 64, 64 * 3)
    assert np.array_equal(bridge.imgmsg_to_cv2(image), colour)
    # A subscriber that works in OpenCV's BGR order gets the same pixels, channels swapped.
    assert np.array_equal(bridge.imgmsg_to_cv2(image, desired_encoding="bgr8"), colour[:, :, ::-1])
    assert image.header.frame_id == info.header.frame_id == "front_optical_frame"
    assert image.header.stamp == info.header.stamp == Time(sec=1700000000, nanosec=500000000)
    assert (info.height, info.width, info.distortion_model) == (48, 64, "plumb_bob")
    assert np.allclose(info.k, [41.5, 0, 31.5, 0, 42.0, 23.5, 0, 0, 1])
    assert np.allclose(info.d, [0.1, -0.05, 0.0, 0.0, 0.01])
    mono, uncalibrated = images.wait(2), infos.wait(2)
    assert mono.encoding == "mono8" and mono.step == 64
    assert np.array_equal(bridge.imgmsg_to_cv2(mono), grey)
    assert uncalibrated.k[0] == 0.0  # sensor_msgs: an uncalibrated camera


def test_depth_camera_publishes_metric_depth_points_and_its_frame_in_tf(ros):
    camera_node = ros(Node("camera_under_test"))
    on_flange = np.eye(4)
    on_flange[:3, 3] = (0.06, 0.0, 0.03)
    wrist = CameraTelemetry(camera_node, "wrist", mount=CameraMount("wrist", "arm", on_flange), cloud_stride=1)
    top = CameraTelemetry(camera_node, "top", cloud_stride=1)
    viewer = ros(Node("viewer"))
    depths = Inbox(viewer, Image, "/camera_under_test/wrist/depth/image_raw")
    depth_infos = Inbox(viewer, CameraInfo, "/camera_under_test/wrist/depth/camera_info")
    clouds = Inbox(viewer, PointCloud2, "/camera_under_test/wrist/points")
    tf = Inbox(viewer, TFMessage, "/tf")
    for publisher in (wrist.depth, wrist.depth_info, wrist.points, wrist.tf):
        wait_matched(publisher)
    k = Intrinsics(8, 6, 10.0, 10.0, 3.5, 2.5)
    depth = np.full((6, 8), 0.4, np.float32)
    depth[0, 0] = 0.0  # no reading
    rgb = np.zeros((6, 8, 3), np.uint8)
    in_base = np.eye(4)
    in_base[:3, 3] = (0.5, 0.0, 1.2)

    wrist.publish(CameraFrame("wrist", rgb, depth, k, np.eye(4), "arm_link0", 1700000000.25, {"mount": "wrist"}))
    top.publish(CameraFrame("top", rgb, depth, k, in_base, "arm_link0", 1700000000.25, {"mount": "fixed"}))
    # Joining late, as rviz may: the fixed camera's frame is latched on /tf_static.
    tf_static = Inbox(viewer, TFMessage, "/tf_static", TF_STATIC_LISTENER)

    image = depths.wait(1)
    assert image.encoding == "32FC1" and image.header.frame_id == "wrist_optical_frame"
    pixels = cv_bridge.CvBridge().imgmsg_to_cv2(image)
    assert np.isnan(pixels[0, 0]) and np.all(pixels.ravel()[1:] == np.float32(0.4))
    info = depth_infos.wait(1)
    assert info.header == image.header and np.allclose(info.k, [10, 0, 3.5, 0, 10, 2.5, 0, 0, 1])
    cloud = clouds.wait(1)
    assert cloud.header == image.header and (cloud.height, cloud.width) == (1, 6 * 8 - 1)
    points = read_points_numpy(cloud, field_names=("x", "y", "z"))
    assert np.allclose(points[:, 2], 0.4) and np.allclose(points[0], [(1 - 3.5) / 10 * 0.4, (0 - 2.5) / 10 * 0.4, 0.4])
    (moving,) = tf.wait(1).transforms
    assert (moving.header.frame_id, moving.child_frame_id) == ("arm_link8", "wrist_optical_frame")
    assert moving.header.stamp == image.header.stamp
    assert (moving.transform.translation.x, moving.transform.translation.z) == pytest.approx((0.06, 0.03))
    (fixed,) = tf_static.wait(1).transforms
    assert (fixed.header.frame_id, fixed.child_frame_id) == ("arm_link0", "top_optical_frame")
    assert (fixed.transform.translation.x, fixed.transform.translation.z) == pytest.approx((0.5, 1.2))


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
