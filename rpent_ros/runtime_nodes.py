"""Runtime nodes: one runtime each, served over RuntimeCall, with telemetry for rviz.

    ros2 run rpent franka_sim_node --ros-args -p arms:=2              # franky-sim + its cameras
    ros2 run rpent franka_arm_node --ros-args -p name:=left -p ip:=127.0.0.1
    ros2 run rpent franka_arm_node --ros-args -p name:=left -p ip:=172.16.0.2 \
        -p urdf:=/path/fr3.urdf -p base_xyz:="[0.0, 0.3, 0.0]" -p base_rpy:="[0.0, 0.0, 0.0]"
    ros2 run rpent franka_gripper_node --ros-args -p name:=left -p ip:=127.0.0.1
    ros2 run rpent camera_node --ros-args -p name:=front -p device:=0
    ros2 run rpent camera_node --ros-args -p name:=wrist -p config:=/path/franka.yaml   # e.g. a RealSense
    ros2 run rpent vla_client_node --ros-args -p endpoint:=socket://127.0.0.1:9100

Every node stops its runtime's motion on shutdown and logs failures with their cause.
For rviz, an arm node latches its URDF on `/<name>/robot_description` and publishes TF for every
link (`world -> <name>_link0` from `base_xyz`/`base_rpy`); its gripper node adds the fingers.
Camera and sim nodes publish each camera's colour, depth, CameraInfo, point cloud and TF frame
(rpent_ros.camera_topics has the topics and frames).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState

from rpent.runtime.arm import RuntimeFault
from rpent.runtime.camera import capture_frame
from rpent_ros.logging_bridge import forward_python_logging
from rpent_ros.robot_description import ArmDescription, UrdfError, base_xyz_for, load_arm_description, three_numbers
from rpent_ros.runtime_server import ARM_METHODS, CAMERA_METHODS, GRIPPER_METHODS, POLICY_METHODS, RuntimeServer
from rpent_ros.signals import shield_shutdown
from rpent_ros.telemetry import ArmTelemetry, CameraTelemetry

log = logging.getLogger("rpent.runtime_nodes")

# Franky arms also answer the envelope checks the tools run before approval (cheap, no motion).
FRANKA_ARM_METHODS = ARM_METHODS | {
    "check_cartesian", "check_joints", "relative_target", "cartesian_path", "joint_path", "settled_state",
}
# The stop tool confirms a gripper stop (and reports one that failed) through the gripper node too.
FRANKA_GRIPPER_METHODS = GRIPPER_METHODS | {"confirm_stopped"}


class RuntimeNode(Node):
    """A node owning runtime objects: serves each at `~/<name>/call`, stops them all on shutdown."""

    def __init__(self, node_name: str, **kwargs: Any) -> None:
        super().__init__(node_name, **kwargs)
        self.group = ReentrantCallbackGroup()
        self.servers: list[RuntimeServer] = []
        self.owned: list[Any] = []

    def serve(self, name: str, target: Any, methods: frozenset[str]) -> None:
        self.owned.append(target)
        self.servers.append(RuntimeServer(self, name, target, methods, self.group))

    def every(self, rate_hz: float, callback: Callable[[], None]) -> None:
        every(self, rate_hz, callback)

    def shutdown(self) -> None:
        for target in self.owned:
            for method in ("stop", "close"):
                function = getattr(target, method, None)
                if callable(function):
                    try:
                        function()
                    except Exception as exc:
                        self.get_logger().error(f"{method} on shutdown failed: {type(exc).__name__}: {exc}")


def every(node: Node, rate_hz: float, callback: Callable[[], None]) -> None:
    """Call `callback` at `rate_hz` on its own callback group; a failure is logged (throttled), never raised."""

    def guarded() -> None:
        try:
            callback()
        except Exception as exc:  # telemetry must not take the node down
            node.get_logger().warning(f"telemetry: {type(exc).__name__}: {exc}", throttle_duration_sec=5.0)

    node.create_timer(1.0 / rate_hz, guarded, callback_group=MutuallyExclusiveCallbackGroup())


def description_or_none(node: Node, arm_name: str, path: str = "") -> ArmDescription | None:
    """The arm's URDF for rviz: `path` (a lab's franka_description output) must load; franky-sim's is optional."""
    try:
        return load_arm_description(arm_name, path or None)
    except UrdfError as exc:
        if path:  # a file the user named must be usable
            raise
        node.get_logger().warning(f"{exc}; rviz gets joint states and frames but no robot model")
        return None


def start_inprocess_telemetry(node: Node, runtime: Any, rate_hz: float, camera_rate_hz: float = 0.0) -> int:
    """rviz telemetry for Franka arms living inside `node` (toolkit_node, runtime_mode:=inprocess):
    the same topics the arm and gripper nodes publish, and with `camera_rate_hz` > 0 the camera
    nodes' topics of its cameras (each picture costs a render or a grab, so off by default).
    Returns how many arms are published."""
    arms = getattr(runtime, "arms", None)
    if not isinstance(arms, dict):
        return 0
    if camera_rate_hz > 0:
        for camera in getattr(runtime, "cameras", None) or []:
            telemetry = CameraTelemetry(node, camera.name, mount=getattr(camera, "mount", None))
            every(node, camera_rate_hz, lambda c=camera, t=telemetry: t.publish(capture_frame(c)))
    grippers = getattr(runtime, "grippers", None) or {}
    for name, arm in arms.items():
        telemetry = ArmTelemetry(node, name, description_or_none(node, name), base_xyz=base_xyz_for(name))
        every(node, rate_hz, lambda arm=arm, telemetry=telemetry: telemetry.publish(arm.state()))
        if name in grippers:
            gripper = grippers[name]
            every(node, min(rate_hz, 10.0), lambda g=gripper, t=telemetry: t.publish_gripper(g.state().width_m))
    return len(arms)


def _connect(node: Node, what: str, factory: Callable[[], Any]) -> Any:
    """Connect, retrying until `connect_wait_s`: the robot (or franky-sim) may come up after this node."""
    wait_s = float(node.declare_parameter("connect_wait_s", 60.0).value)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return factory()
        except Exception as exc:
            if time.monotonic() >= deadline:
                raise
            node.get_logger().info(f"{what} not reachable yet ({exc}); retrying", throttle_duration_sec=10.0)
            time.sleep(0.5)


def _description(node: Node, arm_name: str) -> ArmDescription | None:
    """The arm's URDF for rviz: parameter `urdf` (a lab's franka_description output), else franky-sim's FR3."""
    return description_or_none(node, arm_name, str(node.declare_parameter("urdf", "").value))


def _vector_parameter(node: Node, name: str, default: tuple[float, float, float]) -> tuple[float, float, float]:
    # Dynamic typing, so `[0, 1, 0]` (integers) from a launch file is accepted as well as floats.
    value = node.declare_parameter(name, list(default), ParameterDescriptor(dynamic_typing=True)).value
    return three_numbers(f"parameter {name}", value)


def _safety(node: Node, arm_name: str) -> Any:
    from robots.franka.config import DEFAULT_SAFETY_FILE
    from robots.franka.safety import load_safety_config

    path = node.declare_parameter("safety_file", str(DEFAULT_SAFETY_FILE)).value
    return load_safety_config(path).envelope(arm_name)


class FrankaArmNode(RuntimeNode):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("franka_arm", **kwargs)
        from robots.franka.franky_arm import FrankyArm

        name = self.declare_parameter("name", "arm").value
        ip = self.declare_parameter("ip", "172.16.0.2").value
        rate = float(self.declare_parameter("publish_rate_hz", 30.0).value)
        envelope = _safety(self, name)
        dynamics = float(self.declare_parameter("dynamics_factor", 0.5).value)
        timeout = float(self.declare_parameter("connect_timeout_s", 10.0).value)
        # Read (and refuse bad) visualisation parameters before waiting for the robot.
        description = _description(self, name)
        base_xyz = _vector_parameter(self, "base_xyz", base_xyz_for(name))  # default: franky-sim's placement
        base_rpy = _vector_parameter(self, "base_rpy", (0.0, 0.0, 0.0))
        world_frame = str(self.declare_parameter("world_frame", "world").value)
        arm = _connect(self, f"arm {name} at {ip}", lambda: FrankyArm(
            ip, name=name, envelope=envelope, dynamics_factor=dynamics, connect_timeout_s=timeout,
        ))
        self.serve(name, arm, FRANKA_ARM_METHODS)
        telemetry = ArmTelemetry(self, name, description, base_xyz=base_xyz, base_rpy=base_rpy, world_frame=world_frame)
        self.every(rate, lambda: telemetry.publish(arm.state()))
        self.get_logger().info(f"arm {name} at {ip}: serving ~/{name}/call")


class FrankaGripperNode(RuntimeNode):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__("franka_gripper", **kwargs)
        from robots.franka.franky_gripper import FrankyGripper

        name = self.declare_parameter("name", "arm").value
        ip = self.declare_parameter("ip", "172.16.0.2").value
        envelope = _safety(self, name)
        timeout = float(self.declare_parameter("connect_timeout_s", 10.0).value)
        description = _description(self, name)
        rate = float(self.declare_parameter("publish_rate_hz", 10.0).value)
        gripper = _connect(self, f"gripper {name} at {ip}", lambda: FrankyGripper(
            ip, name=f"{name}_gripper", envelope=envelope, connect_timeout_s=timeout,
        ))
        self.serve(name, gripper, FRANKA_GRIPPER_METHODS)
        # Only this node knows the opening, so it publishes the finger joints; the arm node the rest.
        telemetry = ArmTelemetry(self, name, description, static=False)
        self.every(rate, lambda: telemetry.publish_gripper(gripper.state().width_m))
        self.get_logger().info(f"gripper {name} at {ip}: serving ~/{name}/call")


class CameraNode(RuntimeNode):
    """One camera: USB/UVC through OpenCV (colour) or a RealSense D4xx (colour + aligned depth).

    With `config` (a deployment YAML, as the toolkit node reads) the camera entry named `name`
    gives everything, calibration included; otherwise the parameters do, uncalibrated. A wrist
    camera's pose at capture time uses its arm's joints from /joint_states.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("camera", **kwargs)
        from robots.franka.config import CameraConfig, load_franka_config
        from robots.franka.runtime import device_camera

        name = str(self.declare_parameter("name", "front").value)
        config_path = str(self.declare_parameter("config", "").value)
        rate = float(self.declare_parameter("publish_rate_hz", 5.0).value)
        stride = int(self.declare_parameter("cloud_stride", 2).value)
        if config_path:
            franka = load_franka_config(config_path)
            cam = franka.camera(name)
            if cam is None:
                known = [c.name for c in franka.cameras]
                raise ValueError(f"parameter name: no camera {name!r} in {config_path} (cameras: {known})")
            first_arm = franka.arms[0].name
        else:
            device = str(self.declare_parameter("device", "0").value)
            serial = str(self.declare_parameter("serial", "").value)
            cam = CameraConfig(
                name=name, kind=self.declare_parameter("kind", "opencv").value,
                device=int(device) if device.isdigit() else device, serial=serial or None,
                width=int(self.declare_parameter("width", 640).value), height=int(self.declare_parameter("height", 480).value),
                fps=float(self.declare_parameter("fps", 30.0).value),
            )
            first_arm = "arm"
        camera = device_camera(cam, first_arm, lambda arm: JointStateReader(self, arm))
        self.serve(name, camera, CAMERA_METHODS)
        telemetry = CameraTelemetry(self, name, mount=getattr(camera, "mount", None), cloud_stride=stride)
        self.every(rate, lambda: telemetry.publish(capture_frame(camera)))


class JointStateReader:
    """The latest measured joints of one arm (`<arm>_joint1..7` on /joint_states), for a wrist
    camera in another node than its arm."""

    def __init__(self, node: Node, arm: str) -> None:
        self.arm = arm
        self.names = [f"{arm}_joint{i}" for i in range(1, 8)]
        self._positions: dict[str, float] = {}
        self._lock = threading.Lock()
        node.create_subscription(JointState, "/joint_states", self._receive, 10)

    def _receive(self, msg: JointState) -> None:
        with self._lock:
            self._positions.update((n, float(p)) for n, p in zip(msg.name, msg.position, strict=False) if n in self.names)

    def __call__(self) -> list[float]:
        with self._lock:
            missing = [n for n in self.names if n not in self._positions]
            if missing:
                raise RuntimeFault(f"arm {self.arm}: no joint states yet on /joint_states ({', '.join(missing)})")
            return [self._positions[n] for n in self.names]


class FrankaSimNode(RuntimeNode):
    """franky-sim (one or two arms on 127.0.0.x) and its simulated cameras (fixed and wrist), which
    must render in the simulator's own process. `arm_names` name the arms in order, as the arm
    nodes and the toolkit do (default: arm; or left, right), so camera poses and TF frames use them."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("franka_sim", **kwargs)
        from robots.franka.cameras import MujocoCamera
        from robots.franka.sim import FrankaSim, SimScene

        arms = int(self.declare_parameter("arms", 1).value)
        hosts = list(self.declare_parameter("hosts", ["127.0.0.1", "127.0.0.2"]).value)[:arms]
        default_names = ["arm"] if arms == 1 else ["left", "right"]
        arm_names = list(self.declare_parameter("arm_names", default_names).value)
        if len(arm_names) != arms:
            raise ValueError(f"parameter arm_names: {arms} arms need {arms} names, got {arm_names}")
        width = int(self.declare_parameter("camera_width", 320).value)
        height = int(self.declare_parameter("camera_height", 240).value)
        rate = float(self.declare_parameter("publish_rate_hz", 2.0).value)
        stride = int(self.declare_parameter("cloud_stride", 2).value)
        self.sim = FrankaSim(SimScene() if arms == 1 else SimScene.dual(), hostnames=hosts).start()
        scene = self.sim.scene
        for name in [c.name for c in scene.cameras] + [c.name for c in scene.wrist_cameras]:
            camera = MujocoCamera(self.sim, name, width, height, arm_names=arm_names)
            self.serve(name, camera, CAMERA_METHODS)
            telemetry = CameraTelemetry(self, name, mount=camera.mount, cloud_stride=stride)
            self.every(rate, lambda c=camera, t=telemetry: t.publish(c.capture_frame()))
        self.owned.append(self.sim)  # closed after its cameras
        self.get_logger().info(f"franky-sim running: arms at {', '.join(self.sim.hosts)}")


class VlaClientNode(RuntimeNode):
    """Forwards a VLA policy server (rpent.rpc endpoint) as a runtime other nodes can call."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("vla_client", **kwargs)
        from rpent.rpc import BaseVLAClient, parse_endpoint

        endpoint = parse_endpoint(self.declare_parameter("endpoint", "socket://127.0.0.1:9100").value)
        name = self.declare_parameter("name", "policy").value
        self.serve(name, BaseVLAClient(endpoint), POLICY_METHODS)
        self.get_logger().info(f"policy {name}: forwarding to {endpoint}")


def spin(factory: Callable[[], RuntimeNode], args: list[str] | None = None) -> None:
    rclpy.init(args=args)
    forward_python_logging()
    node: RuntimeNode | None = None
    try:
        node = factory()
        executor = MultiThreadedExecutor(num_threads=8)
        executor.add_node(node)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception as exc:
        log.exception("runtime node failed: %s", exc)
        raise
    finally:
        shield_shutdown()
        if node is not None:
            node.shutdown()
            node.destroy_node()
        rclpy.try_shutdown()


def franka_arm_main(args: list[str] | None = None) -> None:
    spin(FrankaArmNode, args)


def franka_gripper_main(args: list[str] | None = None) -> None:
    spin(FrankaGripperNode, args)


def camera_main(args: list[str] | None = None) -> None:
    spin(CameraNode, args)


def franka_sim_main(args: list[str] | None = None) -> None:
    spin(FrankaSimNode, args)


def vla_client_main(args: list[str] | None = None) -> None:
    spin(VlaClientNode, args)
