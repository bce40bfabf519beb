"""camera_node built from a deployment YAML: a RealSense (here playing a recording the SDK's software
device made) publishes its aligned depth, its colour calibration and its frame in TF, and its frames
reach a toolkit through RuntimeCall whole; a wrist camera takes its pose from the arm's /joint_states.

Skipped where rclpy, cv_bridge, the generated rpent interfaces or pyrealsense2 cannot be imported.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("cv_bridge", reason="cv_bridge not importable: build it into the sourced ROS 2 workspace")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
pytest.importorskip("pyrealsense2", reason="pyrealsense2 is not installed (pip install 'rpent[realsense]')")
cv2 = pytest.importorskip("cv2", reason="opencv-python is not installed")

from perception.realsense_recording import record  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, JointState  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from robots.franka import kinematics  # noqa: E402
from robots.franka.ros.camera_node import CameraNode  # noqa: E402
from rpent.runtime.arm import RuntimeFault  # noqa: E402
from rpent.runtime.camera import CameraFrame  # noqa: E402
from rpent_ros.runtime.remote import CameraProxy  # noqa: E402
from rpent_ros.runtime.telemetry import TF_STATIC_LISTENER  # noqa: E402

from .managed import activated  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]
Q = [0.1, -0.4, 0.05, -2.1, 0.02, 1.7, 0.8]


def _pose(x: float, y: float, z: float) -> list[list[float]]:
    pose = np.eye(4)
    pose[:3, 3] = (x, y, z)
    return pose.tolist()


class Last:
    """The last message of each topic, with a bounded wait."""

    def __init__(self, node: Node, topics: dict[str, tuple[type, object]]) -> None:
        self.changed = threading.Condition()
        self.messages: dict[str, object] = {}
        for topic, (kind, qos) in topics.items():
            node.create_subscription(kind, topic, lambda m, t=topic: self._keep(t, m), qos)

    def _keep(self, topic: str, msg: object) -> None:
        with self.changed:
            self.messages[topic] = msg
            self.changed.notify_all()

    def wait(self, topic: str, timeout_s: float = 30.0):
        with self.changed:
            assert self.changed.wait_for(lambda: topic in self.messages, timeout_s), f"nothing on {topic} in {timeout_s} s"
            return self.messages[topic]


@pytest.fixture
def deployment(tmp_path: Path):
    recording = record(tmp_path / "front.db3")
    video = tmp_path / "wrist.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (64, 48))
    for _ in range(200):
        writer.write(np.full((48, 64, 3), 90, np.uint8))
    writer.release()
    config = {
        "arms": [{"name": "arm", "host": "127.0.0.1"}],
        "cameras": [
            {"name": "front", "kind": "realsense", "device": str(recording.path), "T_base_camera": _pose(1.2, 0.0, 0.6)},
            {"name": "wrist", "device": str(video), "width": 64, "height": 48, "mount": "wrist",
             "T_flange_camera": _pose(0.05, 0.0, 0.04)},
        ],
    }
    path = tmp_path / "franka.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, recording


def test_a_realsense_camera_node_publishes_its_depth_calibration_and_frame(ros, deployment):
    path, recording = deployment
    activated(ros(CameraNode(parameter_overrides=[
        Parameter("name", value="front"), Parameter("config", value=str(path)), Parameter("publish_rate_hz", value=10.0),
    ])))
    client = ros(Node("viewer"))
    seen = Last(client, {
        "/camera/front/depth/image_raw": (Image, 2), "/camera/front/camera_info": (CameraInfo, 2),
        "/tf_static": (TFMessage, TF_STATIC_LISTENER),
    })
    depth, info = seen.wait("/camera/front/depth/image_raw"), seen.wait("/camera/front/camera_info")
    c = recording.colour
    assert depth.encoding == "32FC1" and (depth.width, depth.height) == (c.width, c.height)
    assert depth.header.frame_id == "front_optical_frame"
    assert np.allclose(info.k, [c.fx, 0, c.ppx, 0, c.fy, c.ppy, 0, 0, 1], rtol=1e-6)
    (placed,) = seen.wait("/tf_static").transforms
    assert (placed.header.frame_id, placed.child_frame_id) == ("arm_link0", "front_optical_frame")
    assert (placed.transform.translation.x, placed.transform.translation.z) == pytest.approx((1.2, 0.6))

    proxy = CameraProxy(client, "/camera/front/call", "front")
    proxy.wait_ready(30)
    frame = proxy.capture_frame()
    assert isinstance(frame, CameraFrame) and frame.can_back_project
    assert np.array_equal(frame.rgb, recording.rgb) and frame.depth_m.shape == (c.height, c.width)
    assert np.allclose(frame.T_base_camera, _pose(1.2, 0.0, 0.6)) and frame.base_frame == "arm_link0"


def test_a_wrist_camera_node_places_its_pictures_with_the_arms_joint_states(ros, deployment):
    path, _recording = deployment
    activated(ros(CameraNode(parameter_overrides=[
        Parameter("name", value="wrist"), Parameter("config", value=str(path)), Parameter("publish_rate_hz", value=10.0),
    ])))
    client = ros(Node("arm_stand_in"))
    proxy = CameraProxy(client, "/camera/wrist/call", "wrist")
    proxy.wait_ready(30)
    with pytest.raises(RuntimeFault, match=r"arm arm: no joint states yet on /joint_states"):
        proxy.capture_frame()
    seen = Last(client, {"/tf": (TFMessage, 10)})
    joints = client.create_publisher(JointState, "/joint_states", 10)
    pause, frame = threading.Event(), None
    for _ in range(300):  # joint states until the camera has placed a picture with them (bounded: ~15 s)
        joints.publish(JointState(name=[f"arm_joint{i}" for i in range(1, 8)], position=Q))
        try:
            frame = proxy.capture_frame()
            break
        except RuntimeFault:
            pause.wait(0.05)
    assert frame is not None, "the wrist camera never received the joint states"
    assert frame.depth_m is None and frame.base_frame == "arm_link0"
    assert np.allclose(frame.T_base_camera, kinematics.flange_pose(Q) @ np.asarray(_pose(0.05, 0.0, 0.04)))
    (placed,) = seen.wait("/tf").transforms
    assert (placed.header.frame_id, placed.child_frame_id) == ("arm_link8", "wrist_optical_frame")
    assert placed.transform.translation.z == pytest.approx(0.04)
