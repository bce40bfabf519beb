"""franka_sim_node + franka_arm_node under launch_pytest: what rviz's PointCloud2 / DepthCloud displays
need from the simulated cameras. Depth (32FC1 metres) and CameraInfo with the simulator's exact
intrinsics for the fixed cameras and the wrist camera; their optical frames in TF (fixed on
/tf_static under arm_link0, the wrist camera on /tf under the flange arm_link8); and the point
clouds, carried into `world` through TF as rviz does, lie on the table where the table is.

Needs a sourced ROS 2 with this package built by colcon, and franky-sim (skipped otherwise).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
launch_pytest = pytest.importorskip("launch_pytest", reason="launch_pytest not importable: ROS 2 is not sourced")
pytest.importorskip("franky_sim", reason="franky-sim is not installed (pip install rpent[sim])")

from launch_ros.actions import Node as LaunchNode  # noqa: E402
from rclpy.node import Node  # noqa: E402
from sensor_msgs.msg import CameraInfo, Image, PointCloud2  # noqa: E402
from sensor_msgs_py.point_cloud2 import read_points_numpy  # noqa: E402
from sim_process import free_sim_hosts  # noqa: E402
from tf2_msgs.msg import TFMessage  # noqa: E402

from launch import LaunchDescription  # noqa: E402
from robots.franka.camera_mount import fovy_intrinsics  # noqa: E402
from robots.franka.sim.simulator import TABLE_TOP_Z_M, SimScene  # noqa: E402
from rpent_ros.launch_graph import GRAPH_ARGUMENTS  # noqa: E402
from rpent_ros.launch_helpers import managed_node  # noqa: E402
from rpent_ros.runtime.camera_topics import calibration_fields  # noqa: E402
from rpent_ros.runtime.telemetry import TF_STATIC_LISTENER  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(300)]
WIDTH, HEIGHT = 160, 120
SCENE = SimScene()
FOVY = {c.name: c.fovy_deg for c in (*SCENE.cameras, *SCENE.wrist_cameras)}
CAMERAS = list(FOVY)  # front, top (fixed), wrist


@pytest.fixture(scope="module")
def sim_host() -> str:
    return free_sim_hosts(171, 199)[0]


@launch_pytest.fixture
def sim_and_arm(sim_host):
    sim = {"arms": 1, "hosts": [sim_host], "camera_width": WIDTH, "camera_height": HEIGHT, "publish_rate_hz": 2.0}
    arm = {"name": "arm", "ip": sim_host, "publish_rate_hz": 10.0}
    return LaunchDescription([
        LaunchNode(package="rpent", executable="franka_sim_node", name="franka_sim", parameters=[sim], output="screen"),
        # Taken to active as the launch files take their arm nodes.
        *managed_node({"runtime_state": "active", **{n: d for n, d, _ in GRAPH_ARGUMENTS}}.get, package="rpent",
                      executable="franka_arm_node", name="arm_arm", parameters=[arm], output="screen"),
        launch_pytest.actions.ReadyToTest(),
    ])


class Viewer:
    """Subscribes as rviz does: the last message per topic, and every transform by child frame."""

    def __init__(self, node: Node) -> None:
        self.changed = threading.Condition()
        self.last: dict[str, object] = {}
        self.static: dict[str, tuple[str, np.ndarray, object]] = {}
        self.dynamic: dict[str, tuple[str, np.ndarray, object]] = {}
        for camera in CAMERAS:
            for suffix, kind in (("depth/image_raw", Image), ("camera_info", CameraInfo),
                                 ("depth/camera_info", CameraInfo), ("points", PointCloud2)):
                topic = f"/franka_sim/{camera}/{suffix}"
                node.create_subscription(kind, topic, lambda m, t=topic: self._keep(t, m), 2)
        node.create_subscription(TFMessage, "/tf_static", lambda m: self._tf(self.static, m), TF_STATIC_LISTENER)
        node.create_subscription(TFMessage, "/tf", lambda m: self._tf(self.dynamic, m), 100)

    def _keep(self, topic: str, msg: object) -> None:
        with self.changed:
            self.last[topic] = msg
            self.changed.notify_all()

    def _tf(self, store: dict, msg: TFMessage) -> None:
        with self.changed:
            for t in msg.transforms:
                q, p = t.transform.rotation, t.transform.translation
                store[t.child_frame_id] = (t.header.frame_id, _matrix((p.x, p.y, p.z), (q.x, q.y, q.z, q.w)), t.header.stamp)
            self.changed.notify_all()

    def wait_for(self, condition: Callable[[], bool], what: str, timeout_s: float = 120.0) -> None:
        with self.changed:
            assert self.changed.wait_for(condition, timeout_s), f"timed out waiting for {what}; have {sorted(self.last)}"

    def reaches_world(self, frame: str) -> bool:
        """Whether every transform from `frame` up to `world` has arrived (the arm's moving links come on /tf
        from the arm node, later than the fixed ones on /tf_static)."""
        transforms = {**self.static, **self.dynamic}
        while frame != "world":
            if frame not in transforms:
                return False
            frame = transforms[frame][0]
        return True

    def in_world(self, frame: str) -> np.ndarray:
        transforms = {**self.static, **self.dynamic}
        pose = np.eye(4)
        while frame != "world":
            assert frame in transforms, f"no TF path from {frame} to world"
            parent, matrix, _ = transforms[frame]
            pose = matrix @ pose
            frame = parent
        return pose


def _matrix(xyz, xyzw) -> np.ndarray:
    x, y, z, w = xyzw
    m = np.eye(4)
    m[:3, :3] = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]
    m[:3, 3] = xyz
    return m


@pytest.mark.launch(fixture=sim_and_arm)
def test_sim_cameras_publish_depth_camera_info_and_their_frames_for_rviz(ros):
    viewer = Viewer(ros(Node("rviz_stand_in")))
    topics = [f"/franka_sim/{c}/{s}" for c in CAMERAS for s in ("depth/image_raw", "camera_info", "depth/camera_info", "points")]
    viewer.wait_for(lambda: set(topics) <= set(viewer.last) and all(viewer.reaches_world(f"{c}_optical_frame") for c in CAMERAS),
                    "depth, camera_info and points of every camera, and TF from every camera's frame to world")

    for camera in CAMERAS:
        with viewer.changed:
            depth, info = viewer.last[f"/franka_sim/{camera}/depth/image_raw"], viewer.last[f"/franka_sim/{camera}/camera_info"]
            depth_info = viewer.last[f"/franka_sim/{camera}/depth/camera_info"]
        assert depth.encoding == "32FC1" and (depth.width, depth.height) == (WIDTH, HEIGHT)
        assert depth.header.frame_id == info.header.frame_id == f"{camera}_optical_frame"
        metres = np.frombuffer(bytes(depth.data), np.float32).reshape(HEIGHT, WIDTH)
        # Every camera looks down on the table and the floor (finite below the middle); past the far plane (the
        # front camera's view above the horizon) there is no reading: NaN on the topic, as REP 118 has it.
        finite = np.isfinite(metres)
        assert finite[HEIGHT // 2:].all() and finite.mean() > 0.5 and np.nanmin(metres) > 0.05, (camera, finite.mean())
        # The simulator's exact pinhole: square pixels from its vertical field of view, centre (w-1)/2, (h-1)/2.
        exact = calibration_fields(fovy_intrinsics(FOVY[camera], WIDTH, HEIGHT), WIDTH, HEIGHT)
        for msg in (info, depth_info):
            assert (msg.width, msg.height, msg.distortion_model) == (WIDTH, HEIGHT, "plumb_bob")
            assert list(msg.k) == exact.k and list(msg.p) == exact.p and list(msg.d) == exact.d

    parent = {name: (viewer.static | viewer.dynamic)[f"{name}_optical_frame"][0] for name in CAMERAS}
    assert parent == {"front": "arm_link0", "top": "arm_link0", "wrist": "arm_link8"}
    assert {"front_optical_frame", "top_optical_frame"} <= set(viewer.static)
    assert "wrist_optical_frame" in viewer.dynamic and "wrist_optical_frame" not in viewer.static

    # The clouds in `world`, through the TF tree (arm links from the arm node): the table top is
    # where the simulator has it, seen by a fixed camera and by the wrist camera alike.
    for camera in ("top", "wrist"):
        with viewer.changed:
            cloud = viewer.last[f"/franka_sim/{camera}/points"]
            pose = viewer.in_world(f"{camera}_optical_frame")
        points = read_points_numpy(cloud, field_names=("x", "y", "z")).astype(float)
        world = points @ pose[:3, :3].T + pose[:3, 3]
        over_table = np.all(np.abs(world[:, :2] - SCENE.table_center_xy) < np.subtract(SCENE.table_half_size_xy, 0.02), axis=1)
        height = world[over_table, 2] - TABLE_TOP_Z_M
        on_top = np.abs(height) < 0.002
        # Over the table's footprint every point is on its top or above it (a cube, the arm), none inside it.
        assert over_table.mean() > 0.2 and on_top.mean() > 0.5 and np.all(on_top | (height > 0)), (
            f"{camera}: {over_table.mean():.0%} of its points over the table, {on_top.mean():.0%} of those on its top, "
            f"lowest {height.min() * 1000:.1f} mm from it")
