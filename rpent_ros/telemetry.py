"""Typed telemetry for rviz: arm joint states, URDF and link TF, camera images and camera info."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import String
from tf2_msgs.msg import TFMessage

from rpent.runtime.types import ArmState
from rpent_ros.image_msgs import frame_to_image_msg
from rpent_ros.robot_description import ArmDescription, LinkTransform, transform

# Latched topics (robot_description, /tf_static): a subscriber that joins later still gets the last message.
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)


def _transform_msg(stamp: Time, parent: str, child: str, xyz: Sequence[float], xyzw: Sequence[float]) -> TransformStamped:
    msg = TransformStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = parent
    msg.child_frame_id = child
    msg.transform.translation.x, msg.transform.translation.y, msg.transform.translation.z = (float(v) for v in xyz)
    rotation = msg.transform.rotation
    rotation.x, rotation.y, rotation.z, rotation.w = (float(v) for v in xyzw)
    return msg


class ArmTelemetry:
    """Everything rviz needs to draw one FR3 arm, without robot_state_publisher.

    The arm's owner (`static=True`) latches the URDF on `/<prefix>/robot_description` and, on
    /tf_static, `<world_frame> -> <prefix>_link0` (the arm's placement) plus every fixed joint of
    the URDF; `publish(state)` sends /joint_states (`<prefix>_joint1..7`) and on /tf each arm link
    from the measured joints and `<prefix>_link0 -> <prefix>_ee` (franky's O_T_EE). The gripper's
    owner calls `publish_gripper(width_m)` for the finger joints. Without a description only the
    joint states, the placement and the `_ee` frame are published.
    """

    def __init__(
        self,
        node: Node,
        prefix: str,
        description: ArmDescription | None = None,
        *,
        base_xyz: Sequence[float] = (0.0, 0.0, 0.0),
        base_rpy: Sequence[float] = (0.0, 0.0, 0.0),
        world_frame: str = "world",
        static: bool = True,
    ) -> None:
        self.node = node
        self.prefix = prefix
        self.description = description
        self.joints = node.create_publisher(JointState, "/joint_states", 10)
        self.tf = node.create_publisher(TFMessage, "/tf", 10)
        if not static:
            return
        stamp = node.get_clock().now().to_msg()
        base = LinkTransform(world_frame, f"{prefix}_link0", transform(base_xyz, base_rpy))
        fixed = [] if description is None else description.transforms({}, moving_only=False)
        self.tf_static = node.create_publisher(TFMessage, "/tf_static", LATCHED)
        self.tf_static.publish(TFMessage(transforms=[
            _transform_msg(stamp, t.parent, t.child, t.translation, t.quaternion) for t in (base, *fixed)
        ]))
        if description is not None:
            self.robot_description = node.create_publisher(String, f"/{prefix}/robot_description", LATCHED)
            self.robot_description.publish(String(data=description.urdf))

    def publish(self, state: ArmState) -> None:
        stamp = self.node.get_clock().now().to_msg()
        joint_state = JointState()
        joint_state.header.stamp = stamp
        joint_state.name = [f"{self.prefix}_joint{i + 1}" for i in range(len(state.joints))]
        joint_state.position = [float(q) for q in state.joints]
        joint_state.velocity = [float(v) for v in state.joint_velocities]
        self.joints.publish(joint_state)
        transforms = [_transform_msg(stamp, f"{self.prefix}_link0", f"{self.prefix}_ee",
                                     state.pose.position, state.pose.quaternion)]
        if self.description is not None:
            moving = self.description.transforms(self.description.joint_positions(state.joints))
            transforms += [_transform_msg(stamp, t.parent, t.child, t.translation, t.quaternion) for t in moving]
        self.tf.publish(TFMessage(transforms=transforms))

    def publish_gripper(self, width_m: float) -> None:
        """Finger joints at half the measured opening each (the FR3 hand's fingers mirror each other)."""
        if self.description is None or not self.description.finger_joints:
            return
        stamp = self.node.get_clock().now().to_msg()
        positions = self.description.joint_positions(gripper_width_m=width_m)
        fingers = self.description.resolved(positions)
        joint_state = JointState()
        joint_state.header.stamp = stamp
        joint_state.name = list(fingers)
        joint_state.position = list(fingers.values())
        self.joints.publish(joint_state)
        self.tf.publish(TFMessage(transforms=[
            _transform_msg(stamp, t.parent, t.child, t.translation, t.quaternion)
            for t in self.description.transforms(positions)
        ]))


class CameraTelemetry:
    """Publishes `~/<camera>/image_raw` (rgb8, or mono8 for grey frames) and `~/<camera>/camera_info`
    (pinhole from the vertical field of view), both stamped alike in frame `<camera>`."""

    def __init__(self, node: Node, camera: str, fovy_deg: float = 50.0) -> None:
        self.node = node
        self.camera = camera
        self.fovy_deg = fovy_deg
        self.image = node.create_publisher(Image, f"~/{camera}/image_raw", 2)
        self.info = node.create_publisher(CameraInfo, f"~/{camera}/camera_info", 2)

    def publish(self, frame: np.ndarray) -> None:
        image = frame_to_image_msg(frame, stamp=self.node.get_clock().now().to_msg(), frame_id=self.camera)
        self.image.publish(image)
        height, width = image.height, image.width
        focal = (height / 2) / math.tan(math.radians(self.fovy_deg) / 2)
        # ROS pixel coordinates put (0, 0) at the centre of the top-left pixel, so the optical axis
        # through the middle of the image is at ((width - 1) / 2, (height - 1) / 2).
        cx, cy = (width - 1) / 2, (height - 1) / 2
        info = CameraInfo(height=height, width=width, distortion_model="plumb_bob")
        info.header = image.header
        info.k = [focal, 0.0, cx, 0.0, focal, cy, 0.0, 0.0, 1.0]
        info.p = [focal, 0.0, cx, 0.0, 0.0, focal, cy, 0.0, 0.0, 0.0, 1.0, 0.0]
        info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        info.d = [0.0] * 5
        self.info.publish(info)
