"""Typed telemetry for rviz: arm joint states, URDF and link TF; camera images, depth, camera info,
point clouds and camera frames in TF; keep-out zones as markers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Protocol

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import TransformStamped
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import CameraInfo, Image, JointState, PointCloud2, PointField
from sensor_msgs_py.point_cloud2 import create_cloud
from std_msgs.msg import Header, String
from tf2_msgs.msg import TFMessage
from visualization_msgs.msg import Marker, MarkerArray

from rpent.runtime.camera import CameraFrame
from rpent.runtime.types import ArmState, quat_from_matrix
from rpent_ros.runtime.camera_topics import (
    CalibrationFields,
    CameraPlacement,
    Mount,
    calibration_fields,
    camera_placement,
    cloud_points,
    depth_for_ros,
    is_real_stamp,
    optical_frame,
    stamp_parts,
)
from rpent_ros.runtime.diagnostics import PublishHealth
from rpent_ros.runtime.image_msgs import depth_to_image_msg, frame_to_image_msg


class LinkPlacement(Protocol):
    """One link's transform from its parent, as a robot's arm description gives it."""

    @property
    def parent(self) -> str: ...
    @property
    def child(self) -> str: ...
    @property
    def translation(self) -> tuple[float, float, float]: ...
    @property
    def quaternion(self) -> tuple[float, float, float, float]: ...


class ArmModel(Protocol):
    """What ArmTelemetry reads of a robot's arm description (the Franka's: robots.franka.ros.description):
    its URDF, and the link transforms for given joint positions. rpent_ros knows no robot's model."""

    @property
    def urdf(self) -> str: ...
    @property
    def finger_joints(self) -> tuple[str, ...]: ...
    def joint_positions(self, arm_q: Sequence[float] = (), gripper_width_m: float | None = None) -> dict[str, float]: ...
    def resolved(self, positions: Mapping[str, float]) -> dict[str, float]: ...
    def transforms(self, positions: Mapping[str, float], moving_only: bool = True) -> Sequence[LinkPlacement]: ...


# Latched topics (robot_description, /tf_static): a subscriber that joins later still gets the last message.
LATCHED = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)
# Listening on /tf_static: every arm and fixed camera latches its own message there, so a listener that
# kept only one (depth 1) would lose all but the last that arrived before its callback ran (tf2_ros's
# static listener keeps 100 for the same reason).
TF_STATIC_LISTENER = QoSProfile(depth=100, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                reliability=ReliabilityPolicy.RELIABLE)


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
    """Everything rviz needs to draw one arm, without robot_state_publisher.

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
        description: ArmModel | None = None,
        *,
        base_xyz: Sequence[float] = (0.0, 0.0, 0.0),
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
        base = _transform_msg(stamp, world_frame, f"{prefix}_link0", base_xyz, (0.0, 0.0, 0.0, 1.0))
        fixed = [] if description is None else description.transforms({}, moving_only=False)
        self.tf_static = node.create_publisher(TFMessage, "/tf_static", LATCHED)
        self.tf_static.publish(TFMessage(transforms=[
            base, *(_transform_msg(stamp, t.parent, t.child, t.translation, t.quaternion) for t in fixed)
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


class ZoneShape(Protocol):
    """One keep-out zone as rviz draws it (a robot's: robots.franka.ros.zone_markers.ZoneMarker): a
    cube or cylinder by its centre and size (a cylinder's: diameter, diameter, height), where its name
    goes, its colour; metres, in the frame the markers are published in."""

    @property
    def name(self) -> str: ...
    @property
    def shape(self) -> Literal["cube", "cylinder"]: ...
    @property
    def center_xyz_m(self) -> tuple[float, float, float]: ...
    @property
    def size_xyz_m(self) -> tuple[float, float, float]: ...
    @property
    def label_xyz_m(self) -> tuple[float, float, float]: ...
    @property
    def rgba(self) -> tuple[float, float, float, float]: ...


ZONES_TOPIC = "/keep_out_zones"
#: Height of a zone's name in rviz [m].
ZONE_LABEL_HEIGHT_M = 0.05


def latch_zone_markers(node: Node, zones: Sequence[ZoneShape], frame: str) -> Publisher:
    """Latch `zones` on /keep_out_zones (visualization_msgs/MarkerArray, transient local) once: per zone
    the marker `ns` = its name, id 0 its solid, id 1 its name above it (TEXT_VIEW_FACING, opaque).

    Several nodes latch on this topic (each arm node its arm's zones), so a zone for every arm comes
    from each with the same ns and id and rviz draws it once; nothing here sends DELETEALL, which would
    erase the other nodes' zones. Returns the publisher (the node holds it too)."""
    header = Header(frame_id=frame)  # stamp 0: rviz places them with the latest transform, at any time
    markers = []
    for zone in zones:
        solid = Marker(header=header, ns=zone.name, id=0, action=Marker.ADD,
                       type=Marker.CUBE if zone.shape == "cube" else Marker.CYLINDER)
        _place(solid, zone.center_xyz_m)
        solid.scale.x, solid.scale.y, solid.scale.z = (float(v) for v in zone.size_xyz_m)
        solid.color.r, solid.color.g, solid.color.b, solid.color.a = (float(v) for v in zone.rgba)
        label = Marker(header=header, ns=zone.name, id=1, action=Marker.ADD, type=Marker.TEXT_VIEW_FACING,
                       text=zone.name)
        _place(label, zone.label_xyz_m)
        label.scale.z = ZONE_LABEL_HEIGHT_M
        label.color.r, label.color.g, label.color.b = (float(v) for v in zone.rgba[:3])
        label.color.a = 1.0
        markers += [solid, label]
    publisher = node.create_publisher(MarkerArray, ZONES_TOPIC, LATCHED)
    publisher.publish(MarkerArray(markers=markers))
    return publisher


def _place(marker: Marker, xyz: Sequence[float]) -> None:
    marker.pose.position.x, marker.pose.position.y, marker.pose.position.z = (float(v) for v in xyz)
    marker.pose.orientation.w = 1.0


class CameraTelemetry:
    """One camera's topics for rviz (rpent_ros.runtime.camera_topics names them): colour, aligned depth,
    their CameraInfo, a coloured point cloud, and the camera's optical frame in TF.

    `mount` (a robot's camera mount: rpent_ros.runtime.camera_topics.Mount) hangs a calibrated wrist camera under its
    arm's flange; without it the frame's own pose places the camera. `cloud_stride` keeps every
    n-th pixel in each direction for the point cloud (0: no cloud). `health` counts the frames sent
    and those that could not be (the error still goes up to the caller): a node's diagnostics watch
    it, so a camera whose topics went silent is an ERROR there (rpent_ros.runtime.diagnostics).
    """

    def __init__(self, node: Node, camera: str, *, mount: Mount | None = None, cloud_stride: int = 2) -> None:
        self.node = node
        self.camera = camera
        self.mount = mount
        self.cloud_stride = cloud_stride
        self.image = node.create_publisher(Image, f"~/{camera}/image_raw", 2)
        self.info = node.create_publisher(CameraInfo, f"~/{camera}/camera_info", 2)
        self.depth = node.create_publisher(Image, f"~/{camera}/depth/image_raw", 2)
        self.depth_info = node.create_publisher(CameraInfo, f"~/{camera}/depth/camera_info", 2)
        self.points = node.create_publisher(PointCloud2, f"~/{camera}/points", 2)
        self.tf = node.create_publisher(TFMessage, "/tf", 10)
        # Its own latched publisher: a late subscriber gets this camera's last static transform.
        self.tf_static = node.create_publisher(TFMessage, "/tf_static", LATCHED)
        self._static_sent: CameraPlacement | None = None
        self.health = PublishHealth(f"camera {camera}")

    def publish(self, frame: CameraFrame) -> None:
        try:
            self._publish(frame)
        except Exception as exc:
            self.health.failure(exc)
            raise
        self.health.sent()

    def _publish(self, frame: CameraFrame) -> None:
        sec, nanosec = stamp_parts(frame.stamp_s) if is_real_stamp(frame.stamp_s) else (None, None)
        stamp = Time(sec=sec, nanosec=nanosec) if sec is not None else self.node.get_clock().now().to_msg()
        header = Header(stamp=stamp, frame_id=optical_frame(self.camera))
        self._publish_placement(frame, stamp)
        image = frame_to_image_msg(frame.rgb, stamp=stamp, frame_id=header.frame_id)
        self.image.publish(image)
        info = _camera_info(calibration_fields(frame.intrinsics, image.width, image.height), header)
        self.info.publish(info)
        if frame.depth_m is None:
            return
        self.depth.publish(depth_to_image_msg(depth_for_ros(frame.depth_m), stamp=stamp, frame_id=header.frame_id))
        self.depth_info.publish(info)
        if self.cloud_stride > 0 and frame.intrinsics is not None:
            self.points.publish(create_cloud(header, CLOUD_FIELDS, cloud_points(frame, self.cloud_stride)))

    def _publish_placement(self, frame: CameraFrame, stamp: Time) -> None:
        placement = camera_placement(frame, self.mount)
        if placement is None:
            return
        msg = _transform_msg(stamp, placement.parent, placement.child, placement.matrix[:3, 3],
                             quat_from_matrix(placement.matrix[:3, :3]))
        if not placement.static:
            self.tf.publish(TFMessage(transforms=[msg]))
        elif not _same_placement(placement, self._static_sent):  # once, and again only if it changed
            self.tf_static.publish(TFMessage(transforms=[msg]))
            self._static_sent = placement


# Point cloud layout: x, y, z in metres and rgb as rviz reads it (0x00RRGGBB in a float's bits).
CLOUD_FIELDS = [
    PointField(name=name, offset=4 * i, datatype=PointField.FLOAT32, count=1) for i, name in enumerate(("x", "y", "z", "rgb"))
]


def _same_placement(a: CameraPlacement, b: CameraPlacement | None) -> bool:
    return b is not None and (a.parent, a.child) == (b.parent, b.child) and np.array_equal(a.matrix, b.matrix)


def _camera_info(fields: CalibrationFields, header: Header) -> CameraInfo:
    info = CameraInfo(header=header, height=fields.height, width=fields.width, distortion_model=fields.distortion_model)
    info.d, info.k, info.r, info.p = fields.d, fields.k, fields.r, fields.p
    return info
