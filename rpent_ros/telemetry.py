"""Typed telemetry for rviz: arm joint states and end-effector TF, camera images and camera info."""

from __future__ import annotations

import math

import numpy as np
from geometry_msgs.msg import TransformStamped
from rclpy.node import Node
from sensor_msgs.msg import CameraInfo, Image, JointState
from tf2_msgs.msg import TFMessage

from rpent.runtime.types import ArmState


class ArmTelemetry:
    """Publishes /joint_states (names `<prefix>_joint1..7`) and the TF `<prefix>_link0 -> <prefix>_ee`."""

    def __init__(self, node: Node, prefix: str) -> None:
        self.node = node
        self.prefix = prefix
        self.joints = node.create_publisher(JointState, "/joint_states", 10)
        self.tf = node.create_publisher(TFMessage, "/tf", 10)

    def publish(self, state: ArmState) -> None:
        stamp = self.node.get_clock().now().to_msg()
        joint_state = JointState()
        joint_state.header.stamp = stamp
        joint_state.name = [f"{self.prefix}_joint{i + 1}" for i in range(len(state.joints))]
        joint_state.position = [float(q) for q in state.joints]
        joint_state.velocity = [float(v) for v in state.joint_velocities]
        self.joints.publish(joint_state)
        transform = TransformStamped()
        transform.header.stamp = stamp
        transform.header.frame_id = f"{self.prefix}_link0"
        transform.child_frame_id = f"{self.prefix}_ee"
        x, y, z = state.pose.position
        qx, qy, qz, qw = state.pose.quaternion
        transform.transform.translation.x, transform.transform.translation.y, transform.transform.translation.z = x, y, z
        transform.transform.rotation.x, transform.transform.rotation.y = qx, qy
        transform.transform.rotation.z, transform.transform.rotation.w = qz, qw
        self.tf.publish(TFMessage(transforms=[transform]))


class CameraTelemetry:
    """Publishes `~/<camera>/image_raw` (rgb8) and `~/<camera>/camera_info` (pinhole from the field of view)."""

    def __init__(self, node: Node, camera: str, fovy_deg: float = 50.0) -> None:
        self.node = node
        self.camera = camera
        self.fovy_deg = fovy_deg
        self.image = node.create_publisher(Image, f"~/{camera}/image_raw", 2)
        self.info = node.create_publisher(CameraInfo, f"~/{camera}/camera_info", 2)

    def publish(self, rgb: np.ndarray) -> None:
        stamp = self.node.get_clock().now().to_msg()
        height, width = rgb.shape[:2]
        image = Image(height=height, width=width, encoding="rgb8", is_bigendian=0, step=width * 3,
                      data=np.ascontiguousarray(rgb[:, :, :3]).tobytes())
        image.header.stamp = stamp
        image.header.frame_id = self.camera
        self.image.publish(image)
        focal = (height / 2) / math.tan(math.radians(self.fovy_deg) / 2)
        info = CameraInfo(height=height, width=width, distortion_model="plumb_bob")
        info.header = image.header
        info.k = [focal, 0.0, width / 2, 0.0, focal, height / 2, 0.0, 0.0, 1.0]
        info.p = [focal, 0.0, width / 2, 0.0, 0.0, focal, height / 2, 0.0, 0.0, 0.0, 1.0, 0.0]
        info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        info.d = [0.0] * 5
        self.info.publish(info)
