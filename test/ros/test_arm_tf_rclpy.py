"""franka_arm_node + franka_gripper_node give rviz what it needs to draw an FR3: a latched URDF and TF for every link,
and the arm's keep-out zones as latched markers; the arm node's envelope places the arm where rviz does.

Runs the nodes against franky-sim in a subprocess (`python -m robots.franka.sim`, as test/franka does),
over DDS on loopback. Skipped where rclpy or the generated rpent interfaces cannot be imported (CI has
no ROS 2; run these in a sourced ROS 2 Jazzy workspace where this package was built with colcon).
"""

from __future__ import annotations

import math
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
pytest.importorskip("franky", reason="franky-control is not installed (pip install rpent[sim])")
pytest.importorskip("franky_sim", reason="franky-sim is not installed (pip install rpent[sim])")

from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from sim_process import franka_sim_process  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402
from visualization_msgs.msg import Marker, MarkerArray  # noqa: E402

from robots.franka.config import DEFAULT_SAFETY_FILE  # noqa: E402
from robots.franka.ros.arm_node import FrankaArmNode  # noqa: E402
from robots.franka.ros.description import UrdfError, load_arm_description  # noqa: E402
from robots.franka.ros.gripper_node import FrankaGripperNode  # noqa: E402
from rpent.runtime.arm import MotionRefused  # noqa: E402
from rpent.runtime.types import ArmState, Pose, quat_from_matrix  # noqa: E402
from rpent_ros.runtime.telemetry import TF_STATIC_LISTENER  # noqa: E402

from .managed import activated  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(180)]
LATCHED = QoSProfile(depth=10, durability=DurabilityPolicy.TRANSIENT_LOCAL, reliability=ReliabilityPolicy.RELIABLE)


@pytest.fixture(scope="module")
def sim_host() -> Iterator[str]:
    with franka_sim_process(*(f"127.0.0.{b}" for b in range(146, 151))) as (_proc, host):
        yield host


class RvizStandIn:
    """Subscribes like rviz does; keeps the last transform per child frame and the last joint positions."""

    def __init__(self, node: Node, description_topic: str) -> None:
        self.changed = threading.Condition()
        self.descriptions: list[str] = []
        self.static: dict[str, tuple[str, np.ndarray]] = {}
        self.dynamic: dict[str, tuple[str, np.ndarray]] = {}
        self.joints: dict[str, float] = {}
        self.zones: list[MarkerArray] = []  # one latched message per arm node
        node.create_subscription(String, description_topic, self._description, LATCHED)
        node.create_subscription(MarkerArray, "/keep_out_zones", self._zones, LATCHED)
        node.create_subscription(TFMessage, "/tf_static", lambda m: self._tf(self.static, m), TF_STATIC_LISTENER)
        node.create_subscription(TFMessage, "/tf", lambda m: self._tf(self.dynamic, m), 50)
        node.create_subscription(JointState, "/joint_states", self._joint_state, 50)

    def _description(self, msg: String) -> None:
        with self.changed:
            self.descriptions.append(msg.data)
            self.changed.notify_all()

    def _zones(self, msg: MarkerArray) -> None:
        with self.changed:
            self.zones.append(msg)
            self.changed.notify_all()

    def _tf(self, store: dict[str, tuple[str, np.ndarray]], msg: TFMessage) -> None:
        with self.changed:
            for t in msg.transforms:
                r, p = t.transform.rotation, t.transform.translation
                matrix = np.eye(4)
                matrix[:3, :3] = _rotation(r.x, r.y, r.z, r.w)
                matrix[:3, 3] = (p.x, p.y, p.z)
                store[t.child_frame_id] = (t.header.frame_id, matrix)
            self.changed.notify_all()

    def _joint_state(self, msg: JointState) -> None:
        with self.changed:
            self.joints.update(zip(msg.name, msg.position, strict=True))
            self.changed.notify_all()

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = 30.0) -> None:
        with self.changed:
            assert self.changed.wait_for(condition, timeout_s), f"timed out waiting for {what}"

    def in_frame(self, frame: str, root: str = "world") -> np.ndarray:
        """Compose TF parents up to `root`, as tf2 would."""
        transforms = {**self.static, **self.dynamic}
        pose = np.eye(4)
        while frame != root:
            assert frame in transforms, f"no TF path from {frame} to {root}"
            parent, matrix = transforms[frame]
            pose = matrix @ pose
            frame = parent
        return pose


def _rotation(x: float, y: float, z: float, w: float) -> np.ndarray:
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def test_arm_and_gripper_nodes_latch_the_urdf_and_publish_every_link_frame(ros, sim_host: str) -> None:
    arm_node = activated(ros(FrankaArmNode(parameter_overrides=[
        Parameter("name", value="left"), Parameter("ip", value=sim_host), Parameter("publish_rate_hz", value=20.0),
    ])))
    gripper_node = activated(ros(FrankaGripperNode(parameter_overrides=[
        Parameter("name", value="left"), Parameter("ip", value=sim_host), Parameter("publish_rate_hz", value=20.0),
    ])))
    # Subscribed only after the nodes have published the URDF and static frames once: latched topics
    # still deliver them, as they do to an rviz started late.
    rviz = RvizStandIn(ros(Node("rviz_stand_in")), "/left/robot_description")
    expected = load_arm_description("left")
    moving_links = {f"left_link{i}" for i in range(1, 8)} | {"left_leftfinger", "left_rightfinger", "left_ee"}
    rviz.wait_for(lambda: rviz.descriptions and "left_link0" in rviz.static and moving_links <= set(rviz.dynamic),
                  "the URDF, world -> left_link0 and the moving links")

    links = {e.get("name") for e in ET.fromstring(rviz.descriptions[-1]).findall("link")}
    assert links == set(expected.links)
    parent, base = rviz.static["left_link0"]
    assert parent == "world" and np.allclose(base[:3, 3], (0.0, 0.25, 0.0))  # franky-sim's left arm
    assert {"left_link8", "left_hand", "left_hand_tcp"} <= set(rviz.static)
    assert [rviz.dynamic[f"left_link{i}"][0] for i in range(1, 8)] == [f"left_link{i}" for i in range(7)]
    for link in links:  # rviz can place every link of the model in the fixed frame
        rviz.in_frame(link)
    rviz.wait_for(lambda: {f"left_joint{i}" for i in range(1, 8)} | {"left_finger_joint1"} <= set(rviz.joints),
                  "joint states of the arm and the fingers")

    # The model's TCP, drawn from the link frames, is where franky says the end effector is (arm at rest).
    state = arm_node.managed.target.state()
    tcp = rviz.in_frame("left_hand_tcp", "left_link0")
    assert math.dist(tcp[:3, 3], state.pose.position) < 0.001
    ee = rviz.in_frame("left_ee", "left_link0")
    assert math.dist(ee[:3, 3], tcp[:3, 3]) < 0.001

    # The fingers follow the measured opening.
    gripper = gripper_node.managed.target
    for width in (0.02, 0.06):
        assert gripper.move(width, timeout_s=30).finished
        measured = gripper.state().width_m
        assert abs(measured - width) < 0.003

        def fingers_at(opening: float = measured) -> bool:
            hand_to_finger = rviz.in_frame("left_leftfinger", "left_hand")
            return abs(hand_to_finger[1, 3] - opening / 2) < 0.001

        rviz.wait_for(fingers_at, f"finger frames at width {measured:.3f} m")
    # The right finger is the left one turned half a turn about the hand's z axis (mirrored).
    assert abs(quat_from_matrix(rviz.in_frame("left_rightfinger", "left_hand")[:3, :3])[2]) == pytest.approx(1.0)


def test_a_urdf_the_user_names_must_load_before_the_node_waits_for_the_robot(ros, tmp_path) -> None:
    with pytest.raises(UrdfError, match=r"missing\.urdf: cannot read"):
        # Nothing listens on this address: had the node connected first, it would fail with a connection error.
        FrankaArmNode(parameter_overrides=[
            Parameter("name", value="left"), Parameter("ip", value="127.0.0.151"),
            Parameter("urdf", value=str(tmp_path / "missing.urdf")),
        ])


def test_a_bad_base_placement_is_refused_naming_the_parameter(ros) -> None:
    with pytest.raises(ValueError, match=r"parameter base_xyz: must be a list of 3 numbers, got \[0\.0, 0\.25\]"):
        FrankaArmNode(parameter_overrides=[
            Parameter("name", value="left"), Parameter("ip", value="127.0.0.151"),
            Parameter("base_xyz", value=[0.0, 0.25]),
        ])


def test_toolkit_node_with_the_arm_inside_publishes_the_same_model_and_frames(ros, franka_sim_toolkit, tmp_path) -> None:
    toolkit = franka_sim_toolkit(tmp_path / "franka", publish_rate_hz=20.0)
    rviz = RvizStandIn(ros(Node("rviz_stand_in")), "/arm/robot_description")
    moving_links = {f"arm_link{i}" for i in range(1, 8)} | {"arm_leftfinger", "arm_rightfinger", "arm_ee"}
    rviz.wait_for(lambda: rviz.descriptions and "arm_link0" in rviz.static and moving_links <= set(rviz.dynamic),
                  "the URDF, world -> arm_link0 and the moving links")
    arm = toolkit.runtime_kwargs["runtime"].arm()
    state = arm.state()
    tcp = rviz.in_frame("arm_hand_tcp", "arm_link0")
    assert math.dist(tcp[:3, 3], state.pose.position) < 0.001
    # The arm's keep-out zones (the shipped safety file names one), latched as the arm node would.
    rviz.wait_for(lambda: rviz.zones, "the keep-out zones")
    zones = {zone.name for zone in arm.envelope.keep_out}
    assert zones and {(m.ns, m.id) for m in rviz.zones[-1].markers} == {(z, i) for z in zones for i in (0, 1)}
    assert {m.header.frame_id for m in rviz.zones[-1].markers} == {"world"}


class _PlacedArm:
    """An arm of a deployment YAML placing it at `base_xyz_m`, standing at home (no robot needed)."""

    def __init__(self, base_xyz_m: tuple[float, float, float]) -> None:
        from robots.franka.safety import SafetyEnvelope

        self.envelope = SafetyEnvelope(arm_name="left", base_xyz_m=base_xyz_m)

    def state(self) -> ArmState:
        joints = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)
        return ArmState(pose=self.envelope.tcp_pose(joints), joints=joints)


def test_a_toolkit_node_with_real_arms_inside_draws_each_where_its_envelope_places_it(ros) -> None:
    from robots.franka.ros.inprocess import start_inprocess_telemetry

    class Runtime:  # the deployment YAML's left arm at y 0.3 (franky-sim's left arm stands at 0.25)
        arms = {"left": _PlacedArm((0.0, 0.3, 0.0))}

    node = ros(Node("toolkit"))
    rviz = RvizStandIn(ros(Node("rviz_stand_in")), "/left/robot_description")
    assert start_inprocess_telemetry(node, Runtime(), rate_hz=10.0) == 1
    rviz.wait_for(lambda: "left_link0" in rviz.static, "world -> left_link0")
    parent, base = rviz.static["left_link0"]
    assert parent == "world" and np.allclose(base[:3, 3], (0.0, 0.3, 0.0)) and np.allclose(base[:3, :3], np.eye(3))


def _safety_file(path, zones: list[dict]) -> str:
    """The shipped safety file with these keep-out zones instead of its own."""
    data = yaml.safe_load(DEFAULT_SAFETY_FILE.read_text())
    data["keep_out"] = zones
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_each_arm_node_latches_the_keep_out_zones_of_its_arm_as_rviz_markers(ros, sim_host: str, tmp_path) -> None:
    safety = _safety_file(tmp_path / "zones.yaml", [
        {"name": "shelf", "box": {"x_m": [0.2, 0.5], "y_m": [0.62, 0.9], "z_m": [0.0, 0.9]}},  # every arm's
        {"name": "right_tripod", "cylinder": {"center_xy_m": [0.95, -0.55], "radius_m": 0.06, "z_m": [0.0, 1.4]},
         "arms": ["right"]},
    ])
    placed = [Parameter("safety_file", value=safety), Parameter("world_frame", value="lab")]
    activated(ros(FrankaArmNode(parameter_overrides=[
        Parameter("name", value="left"), Parameter("ip", value=sim_host), *placed])))
    # The right arm's node latches its zones at start, before it connects (nothing listens on its address).
    ros(FrankaArmNode(parameter_overrides=[Parameter("name", value="right"), Parameter("ip", value="127.0.0.151"), *placed]))
    # Subscribed after both nodes latched their markers, as an rviz started later.
    rviz = RvizStandIn(ros(Node("rviz_stand_in")), "/left/robot_description")
    rviz.wait_for(lambda: len(rviz.zones) == 2, "both arm nodes' keep-out zones")

    by_node = sorted(({(m.ns, m.id): m for m in msg.markers} for msg in rviz.zones), key=len)
    assert [sorted(markers) for markers in by_node] == [  # the left arm's lacks the right arm's zone
        [("shelf", 0), ("shelf", 1)], [("right_tripod", 0), ("right_tripod", 1), ("shelf", 0), ("shelf", 1)]]
    left, right = by_node
    for key in (("shelf", 0), ("shelf", 1)):  # the zone of every arm comes from both alike: rviz draws it once
        assert left[key] == right[key]
    markers = right
    assert all(m.header.frame_id == "lab" and m.action == Marker.ADD for m in markers.values())

    def placed_at(marker: Marker) -> tuple[float, ...]:
        return (marker.pose.position.x, marker.pose.position.y, marker.pose.position.z)

    shelf, tripod = markers[("shelf", 0)], markers[("right_tripod", 0)]
    assert shelf.type == Marker.CUBE
    assert placed_at(shelf) == pytest.approx((0.35, 0.76, 0.45))
    assert (shelf.scale.x, shelf.scale.y, shelf.scale.z) == pytest.approx((0.3, 0.28, 0.9))
    assert tripod.type == Marker.CYLINDER
    assert placed_at(tripod) == pytest.approx((0.95, -0.55, 0.7))
    assert (tripod.scale.x, tripod.scale.y, tripod.scale.z) == pytest.approx((0.12, 0.12, 1.4))  # diameter, height
    assert shelf.color.r > 0.5 > shelf.color.g and shelf.color.a == pytest.approx(0.35)  # translucent red
    for name, solid in (("shelf", shelf), ("right_tripod", tripod)):  # each named just above its top
        label = markers[(name, 1)]
        assert label.type == Marker.TEXT_VIEW_FACING and label.text == name
        assert placed_at(label)[:2] == pytest.approx(placed_at(solid)[:2])
        assert 0 < placed_at(label)[2] - (placed_at(solid)[2] + solid.scale.z / 2) < 0.15


def test_the_arm_node_checks_zones_where_its_base_xyz_places_the_arm(ros, sim_host: str, tmp_path) -> None:
    def block_on_the_table(name: str, world_y: float) -> dict:  # 10 cm wide, up to 30 cm
        return {"name": name, "box": {"x_m": [0.4, 0.6], "y_m": [world_y - 0.05, world_y + 0.05], "z_m": [0.0, 0.3]}}

    # One block below the hand where base_xyz puts the arm, one where it would be with the base at the origin.
    safety = _safety_file(tmp_path / "zones.yaml", [block_on_the_table("in_front_of_the_arm", 0.25),
                                                    block_on_the_table("were_the_base_at_the_origin", 0.0)])
    arm = activated(ros(FrankaArmNode(parameter_overrides=[
        Parameter("name", value="left"), Parameter("ip", value=sim_host), Parameter("safety_file", value=safety),
        Parameter("base_xyz", value=[0.0, 0.25, 0.0])]))).managed.target
    down_to_the_table = Pose((0.5, 0.0, 0.25), arm.state().pose.quaternion)  # base frame; allowed without zones
    with pytest.raises(MotionRefused, match=r"violates keep-out zone 'in_front_of_the_arm' "):
        arm.check_cartesian([down_to_the_table])


def test_a_bad_safety_file_is_refused_before_the_arm_node_waits_for_the_robot(ros, tmp_path) -> None:
    safety = _safety_file(tmp_path / "bad.yaml", [{"name": "a", "box": {"x_m": [0, 1], "y_m": [0, 1], "z_m": [0, 1]},
                                                    "cylinder": {"center_xy_m": [0, 0], "radius_m": 0.1, "z_m": [0, 1]}}])
    with pytest.raises(ValueError, match=r"bad\.yaml: keep_out\[0\]: keep_out zone 'a': give exactly one of box or cyl"):
        # Nothing listens on this address: had the node connected first, it would fail with a connection error.
        FrankaArmNode(parameter_overrides=[Parameter("name", value="left"), Parameter("ip", value="127.0.0.151"),
                                           Parameter("safety_file", value=safety)])
