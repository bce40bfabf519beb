"""Runtime nodes: one runtime each, served over RuntimeCall, with telemetry for rviz.

    ros2 run rpent franka_sim_node --ros-args -p arms:=2 -p sim_seed:=3       # franky-sim + its cameras
    ros2 run rpent franka_arm_node --ros-args -r __node:=arm_left -p name:=left -p ip:=127.0.0.1
    ros2 lifecycle set /arm_left configure && ros2 lifecycle set /arm_left activate
    ros2 run rpent franka_arm_node --ros-args -p name:=left -p ip:=172.16.0.2 \
        -p urdf:=/path/fr3.urdf -p base_xyz:="[0.0, 0.3, 0.0]" -p base_rpy:="[0.0, 0.0, 0.0]"
    ros2 run rpent franka_gripper_node --ros-args -p name:=left -p ip:=127.0.0.1
    ros2 run rpent camera_node --ros-args -p name:=front -p device:=0
    ros2 run rpent camera_node --ros-args -p name:=wrist -p config:=/path/franka.yaml   # e.g. a RealSense

The arm, gripper and camera nodes are managed (lifecycle) nodes (rpent_ros.managed_node): they
start unconfigured; configure connects, activate admits motions (a camera's captures), deactivate
stops them and refuses new ones, cleanup disconnects. The launch files take them to active. Each
publishes its health on /diagnostics. Every node stops its runtime's motion on shutdown and logs
failures with their cause. For rviz, an arm node latches its URDF on `/<name>/robot_description`
and publishes TF for every link (`world -> <name>_link0` from `base_xyz`/`base_rpy`); its gripper
node adds the fingers. Camera and sim nodes publish each camera's colour, depth, CameraInfo, point
cloud and TF frame (rpent_ros.camera_topics has the topics and frames).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from sensor_msgs.msg import JointState

from rpent.robot import ConfigError
from rpent.runtime.arm import RuntimeFault
from rpent.runtime.camera import capture_frame
from rpent_ros import node_main
from rpent_ros.diagnostics import PublisherDiagnostics
from rpent_ros.managed_node import ManagedRuntimeNode
from rpent_ros.params import NodeParameters, Param
from rpent_ros.robot_description import ArmDescription, UrdfError, base_xyz_for, load_arm_description
from rpent_ros.runtime_server import ARM_METHODS, CAMERA_METHODS, GRIPPER_METHODS, RuntimeServer
from rpent_ros.telemetry import ArmTelemetry, CameraTelemetry

log = logging.getLogger("rpent.runtime_nodes")

# Franky arms also answer the envelope checks the tools run before approval (cheap, no motion).
FRANKA_ARM_METHODS = ARM_METHODS | {
    "check_cartesian", "check_joints", "relative_target", "cartesian_path", "joint_path", "settled_state",
    "run_joint_steps",  # a policy's chunk, streamed at its control rate beside the arm (vla_client_node)
}
# The stop tool confirms a gripper stop (and reports one that failed) through the gripper node too.
FRANKA_GRIPPER_METHODS = GRIPPER_METHODS | {"confirm_stopped"}
# What an inactive node refuses: whatever moves the robot (state, checks, wait and stop stay served).
ARM_MOTIONS = frozenset({"start_cartesian", "start_relative", "start_joints", "run_joint_steps"})
GRIPPER_MOTIONS = frozenset({"move", "grasp", "open"})


class RuntimeNode(Node):
    """A node owning runtime objects (the simulator, a policy client): serves each at `~/<name>/call`
    from the start and stops them all on shutdown."""

    def __init__(self, node_name: str, **kwargs: Any) -> None:
        super().__init__(node_name, automatically_declare_parameters_from_overrides=True, **kwargs)
        self.group = ReentrantCallbackGroup()
        self.servers: list[RuntimeServer] = []
        self.owned: list[Any] = []

    def serve(self, name: str, target: Any, methods: frozenset[str]) -> None:
        self.owned.append(target)
        self.servers.append(RuntimeServer(self, name, target, methods, self.group))

    def every(self, rate_hz: float, callback: Callable[[], None]) -> None:
        every(self, rate_hz, callback)

    def shutdown(self) -> None:
        for timer in list(self.timers):  # telemetry ends before the devices it reads close
            self.destroy_timer(timer)
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


def _safety_envelope(path: str, arm_name: str) -> Any:
    from robots.franka.safety import load_safety_config

    return load_safety_config(path).envelope(arm_name)


def _safety_param() -> Param:
    from robots.franka.config import DEFAULT_SAFETY_FILE

    return Param("safety_file", str(DEFAULT_SAFETY_FILE), "safety envelope YAML: workspace, speeds, forces and "
                 "gripper limits every motion is checked against (docs/franka-safety.md)")


NAME = Param("name", "arm", "the arm's name: prefix of its joints and frames (<name>_joint1, <name>_link0); "
             "RuntimeCall at ~/<name>/call")
IP = Param("ip", "172.16.0.2", "FCI address of the robot (franky-sim: its 127.0.0.x address)")
CONNECT_TIMEOUT = Param("connect_timeout_s", 10.0, "seconds one connection attempt may take", low=0.1, high=600.0)
URDF = Param("urdf", "", "FR3 URDF for rviz (a lab's franka_description output); empty: the one franky-sim ships")


class FrankaArmNode(ManagedRuntimeNode):
    """One FR3 arm over FCI (franky), managed: configure connects, activate admits motions."""

    kind = "arm"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("franka_arm", [
            NAME, IP, _safety_param(), CONNECT_TIMEOUT, URDF,
            Param("publish_rate_hz", 30.0, "joint states and TF per second", low=0.1, high=1000.0),
            Param("dynamics_factor", 0.5, "share of the FR3's velocity, acceleration and jerk limits motions may use "
                  "(franky's relative dynamics factor)", low=0.01, high=1.0),
            Param("base_xyz", None, "where the arm's base sits in world_frame, metres (default: franky-sim's "
                  "placement for this arm name)", kind="float[]", length=3),
            Param("base_rpy", [0.0, 0.0, 0.0], "roll, pitch, yaw of the arm's base in world_frame, radians", length=3),
            Param("world_frame", "world", "TF frame the arm's base is placed in"),
            Param("realtime", "auto", "franky's real-time scheduling: auto enforces it on a real arm (ip not on "
                  "loopback); ignore risks communication reflexes without a real-time kernel",
                  choices=("auto", "enforce", "ignore")),
        ], FRANKA_ARM_METHODS, ARM_MOTIONS, **kwargs)
        p = self.params
        # Read (and refuse bad) files before any robot is waited for.
        self.envelope = _safety_envelope(p["safety_file"], self.runtime_name)
        base_xyz = p["base_xyz"] if p["base_xyz"] is not None else base_xyz_for(self.runtime_name)
        self.telemetry = ArmTelemetry(self, self.runtime_name, description_or_none(self, self.runtime_name, p["urdf"]),
                                      base_xyz=base_xyz, base_rpy=p["base_rpy"], world_frame=p["world_frame"])

    def connect(self) -> Any:
        from robots.franka.hardware.franky_arm import FrankyArm

        p = self.params
        realtime = {"auto": None, "enforce": True, "ignore": False}[p["realtime"]]
        return FrankyArm(p["ip"], name=self.runtime_name, envelope=self.envelope, dynamics_factor=p["dynamics_factor"],
                         connect_timeout_s=p["connect_timeout_s"], realtime=realtime)

    def start_telemetry(self, arm: Any) -> None:
        self.every(self.params["publish_rate_hz"], lambda: self.telemetry.publish(arm.state()))

    def served_functions(self) -> dict[str, Callable[..., Any]]:
        from robots.franka import joint_steps

        return {"run_joint_steps": joint_steps.run}


class FrankaGripperNode(ManagedRuntimeNode):
    """The Franka Hand of one arm, managed like the arm node."""

    kind = "gripper"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("franka_gripper", [
            NAME, IP, _safety_param(), CONNECT_TIMEOUT, URDF,
            Param("publish_rate_hz", 10.0, "finger joint states and TF per second", low=0.1, high=100.0),
        ], FRANKA_GRIPPER_METHODS, GRIPPER_MOTIONS, **kwargs)
        self.envelope = _safety_envelope(self.params["safety_file"], self.runtime_name)
        # Only this node knows the opening, so it publishes the finger joints; the arm node the rest.
        self.telemetry = ArmTelemetry(self, self.runtime_name,
                                      description_or_none(self, self.runtime_name, self.params["urdf"]), static=False)

    def connect(self) -> Any:
        from robots.franka.hardware.franky_gripper import FrankyGripper

        return FrankyGripper(self.params["ip"], name=f"{self.runtime_name}_gripper", envelope=self.envelope,
                             connect_timeout_s=self.params["connect_timeout_s"])

    def start_telemetry(self, gripper: Any) -> None:
        self.every(self.params["publish_rate_hz"], lambda: self.telemetry.publish_gripper(gripper.state().width_m))


class CameraNode(ManagedRuntimeNode):
    """One camera: USB/UVC through OpenCV (colour) or a RealSense D4xx (colour + aligned depth).

    With `config` (a deployment YAML, as the toolkit node reads) the camera entry named `name`
    gives everything, calibration included; otherwise the parameters do, uncalibrated. A wrist
    camera's pose at capture time uses its arm's joints from /joint_states. Configure opens the
    device; captures (and the picture topics) run only while active.
    """

    kind = "camera"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("camera", [
            Param("name", "front", "the camera's name: its topics ~/<name>/..., frame <name>_optical_frame, "
                  "RuntimeCall at ~/<name>/call"),
            Param("config", "", "deployment YAML whose camera entry `name` gives device, calibration and mount "
                  "(then the device parameters below are not used)"),
            Param("publish_rate_hz", 5.0, "pictures per second on the camera's topics while active", low=0.1, high=120.0),
            Param("cloud_stride", 2, "point cloud keeps every n-th pixel in each direction (0: no cloud)",
                  low=0, high=64),
            Param("kind", "opencv", "camera driver", choices=("opencv", "realsense")),
            Param("device", "0", "OpenCV device index or path; a RealSense recording (.bag) to play back",
                  numbers_as_text=True),
            Param("serial", "", "RealSense serial number (empty: the only one connected)"),
            Param("width", 640, "image width in pixels", low=1, high=8192),
            Param("height", 480, "image height in pixels", low=1, high=8192),
            Param("fps", 30.0, "frames per second asked of the device", low=0.1, high=1000.0),
        ], CAMERA_METHODS, CAMERA_METHODS, acts="captures", **kwargs)
        self.camera_config, self.first_arm = self._camera_config()
        self._joint_readers: dict[str, JointStateReader] = {}
        self.telemetry: CameraTelemetry | None = None

    def hardware_id(self) -> str:
        return str(self.params.get("serial") or self.params.get("device") or self.runtime_name)

    def _camera_config(self) -> tuple[Any, str]:
        from robots.franka.config import CameraConfig, load_franka_config

        p = self.params
        if p["config"]:
            franka = load_franka_config(p["config"])
            cam = franka.camera(self.runtime_name)
            if cam is None:
                known = [c.name for c in franka.cameras]
                raise ConfigError(f"parameter name: no camera {self.runtime_name!r} in {p['config']} (cameras: {known})")
            return cam, franka.arms[0].name
        device = p["device"]
        return CameraConfig(name=self.runtime_name, kind=p["kind"], device=int(device) if device.isdigit() else device,
                            serial=p["serial"] or None, width=p["width"], height=p["height"], fps=p["fps"]), "arm"

    def _joints_of(self, arm: str) -> JointStateReader:
        if arm not in self._joint_readers:
            self._joint_readers[arm] = JointStateReader(self, arm)
        return self._joint_readers[arm]

    def connect(self) -> Any:
        from robots.franka.runtime import device_camera

        return device_camera(self.camera_config, self.first_arm, self._joints_of)

    def start_telemetry(self, camera: Any) -> None:
        if self.telemetry is None:
            self.telemetry = CameraTelemetry(self, self.runtime_name, cloud_stride=self.params["cloud_stride"])
            self.diagnostics.watch(self.telemetry.health)  # pictures that cannot go out: ERROR, counted
        telemetry = self.telemetry
        telemetry.mount = getattr(camera, "mount", None)
        self.every(self.params["publish_rate_hz"], lambda: telemetry.publish(capture_frame(camera)), active_only=True)


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
    nodes and the toolkit do (default: arm; or left, right), so camera poses and TF frames use them.
    `sim_seed` places the objects at random, reachable within each arm's safety envelope, exactly
    as `rpent run --sim --sim-seed N` does in process."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("franka_sim", **kwargs)
        from robots.franka.cameras import MujocoCamera
        from robots.franka.sim.simulator import FrankaSim

        parameters = NodeParameters(self)
        p = parameters.declare(
            Param("arms", 1, "simulated arms", low=1, high=2),
            Param("hosts", ["127.0.0.1", "127.0.0.2"], "loopback address of each arm's FCI, in order"),
            Param("arm_names", None, "the arms' names in order (default: arm; or left, right)", kind="str[]"),
            Param("camera_width", 320, "simulated camera image width in pixels", low=16, high=4096),
            Param("camera_height", 240, "simulated camera image height in pixels", low=16, high=4096),
            Param("publish_rate_hz", 2.0, "pictures per second on each camera's topics", low=0.1, high=60.0),
            Param("cloud_stride", 2, "point cloud keeps every n-th pixel in each direction (0: no cloud)", low=0, high=64),
            Param("sim_seed", None, "place the scene's objects at random for this seed (unset: the fixed scene)",
                  kind="int", low=0, high=2**31 - 1),
            Param("joint_record", "", "file the simulator appends its arms' true joint positions to, ten times a "
                  "second (JSON lines; '': none): what moved, whatever the ROS graph said"),
            _safety_param(),
        )
        parameters.finish()
        arms = p["arms"]
        arm_names = p["arm_names"] or (["arm"] if arms == 1 else ["left", "right"])
        if len(arm_names) != arms:
            raise ConfigError(f"parameter arm_names: {arms} arms need {arms} names, got {arm_names}")
        if len(p["hosts"]) < arms:
            raise ConfigError(f"parameter hosts: {arms} arms need {arms} addresses, got {p['hosts']}")
        scene = sim_scene(arm_names, p["safety_file"], p["sim_seed"], p["camera_width"] / p["camera_height"])
        # Served (arms reachable) only once its cameras exist: see FrankaSim.build.
        self.sim = FrankaSim(scene, hostnames=p["hosts"][:arms]).build()
        published = []
        for name in [c.name for c in scene.cameras] + [c.name for c in scene.wrist_cameras]:
            camera = MujocoCamera(self.sim, name, p["camera_width"], p["camera_height"], arm_names=arm_names)
            self.serve(name, camera, CAMERA_METHODS)
            telemetry = CameraTelemetry(self, name, mount=camera.mount, cloud_stride=p["cloud_stride"])
            self.every(p["publish_rate_hz"], lambda c=camera, t=telemetry: t.publish(c.capture_frame()))
            published.append(telemetry.health)
        PublisherDiagnostics(self, published, "franky-sim")  # a camera that cannot publish: ERROR there
        if p["joint_record"]:
            record = open(p["joint_record"], "a")  # noqa: SIM115 (closed on shutdown, after the timers)
            self.owned.append(record)
            self.every(10.0, partial(_record_joints, record, self.sim, arm_names))
        self.owned.append(self.sim)  # closed after its cameras
        self.sim.serve()
        seed = "fixed scene" if p["sim_seed"] is None else f"random scene of seed {p['sim_seed']}"
        self.get_logger().info(f"franky-sim running ({seed}): arms at {', '.join(self.sim.hosts)}")


def _record_joints(record: Any, sim: Any, arm_names: list[str]) -> None:
    arms = {name: [round(float(q), 6) for q in sim.arm_joints(i)] for i, name in enumerate(arm_names)}
    # sim_s beside the wall clock: how fast the simulation runs (below real time, franky's motions lag the wall clock).
    record.write(json.dumps({"t": round(time.time(), 3), "sim_s": round(sim.time_s, 4), "arms": arms}) + "\n")
    record.flush()


def sim_scene(arm_names: list[str], safety_file: str, sim_seed: int | None, image_aspect: float) -> Any:
    """The scene franky-sim simulates: one or two arms, objects fixed or placed at random for `sim_seed`
    within each arm's envelope from its home pose (robots.franka.runtime.build_runtime does the same)."""
    from robots.franka.config import HOME_JOINTS_RAD
    from robots.franka.safety import load_safety_config
    from robots.franka.sim.scene_layout import random_scene
    from robots.franka.sim.simulator import SimScene

    scene = SimScene() if len(arm_names) == 1 else SimScene.dual()
    if sim_seed is None:
        return scene
    safety = load_safety_config(safety_file)
    envelopes = [safety.envelope(name, position) for name, position in zip(arm_names, scene.arm_positions, strict=True)]
    return random_scene(sim_seed, scene, envelopes, [HOME_JOINTS_RAD] * len(arm_names), image_aspect=image_aspect)


def _serve(program: str, factory: Callable[[], Any], args: list[str] | None) -> None:
    node_main.init(args)
    node_main.serve(program, factory, shutdown=lambda node: node.shutdown())


def franka_arm_main(args: list[str] | None = None) -> None:
    _serve("franka_arm_node", FrankaArmNode, args)


def franka_gripper_main(args: list[str] | None = None) -> None:
    _serve("franka_gripper_node", FrankaGripperNode, args)


def camera_main(args: list[str] | None = None) -> None:
    _serve("camera_node", CameraNode, args)


def franka_sim_main(args: list[str] | None = None) -> None:
    _serve("franka_sim_node", FrankaSimNode, args)
