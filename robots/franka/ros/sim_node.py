"""franka_sim_node: franky-sim (one or two arms on 127.0.0.x) and its simulated cameras as one node.

    ros2 run rpent franka_sim_node --ros-args -p arms:=2 -p sim_seed:=3

The arm and gripper nodes reach the simulated arms over FCI as they would real ones; the cameras
must render in the simulator's own process, so this node serves them (RuntimeCall at
`~/<camera>/call`) and publishes their topics (rpent_ros.runtime.camera_topics).
"""

from __future__ import annotations

import json
import time
from functools import partial
from typing import Any

from robots.franka.ros.node_params import safety_param
from rpent.robot import ConfigError
from rpent_ros import node_main
from rpent_ros.params import NodeParameters, Param
from rpent_ros.runtime.diagnostics import PublisherDiagnostics
from rpent_ros.runtime.runtime_node import RuntimeNode
from rpent_ros.runtime.server import CAMERA_METHODS
from rpent_ros.runtime.telemetry import CameraTelemetry


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
            Param("lockstep", True, "while an arm moves, each physics step waits for its client's answer (the robot's "
                  "clock keeps time with a late client); false: the wall clock, whatever the clients do"),
            Param("joint_record", "", "file the simulator appends its arms' true joint positions and velocities to, "
                  "50 times a second (JSON lines; '': none): what moved, whatever the ROS graph said"),
            safety_param(),
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
        self.sim = FrankaSim(scene, hostnames=p["hosts"][:arms], lockstep=p["lockstep"]).build()
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
            self.every(50.0, partial(_record_joints, record, self.sim, arm_names))
        self.owned.append(self.sim)  # closed after its cameras
        self.sim.serve()
        seed = "fixed scene" if p["sim_seed"] is None else f"random scene of seed {p['sim_seed']}"
        self.get_logger().info(f"franky-sim running ({seed}): arms at {', '.join(self.sim.hosts)}")


def _record_joints(record: Any, sim: Any, arm_names: list[str]) -> None:
    arms = {name: [round(float(q), 6) for q in sim.arm_joints(i)] for i, name in enumerate(arm_names)}
    speeds = {name: [round(float(v), 5) for v in sim.arm_joint_velocities(i)] for i, name in enumerate(arm_names)}
    # sim_s beside the wall clock: how fast the simulation runs (below real time, franky's motions lag the wall clock).
    record.write(json.dumps({"t": round(time.time(), 3), "sim_s": round(sim.time_s, 4), "arms": arms,
                             "dq": speeds}) + "\n")
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


def franka_sim_main(args: list[str] | None = None) -> None:
    node_main.run_runtime_node("franka_sim_node", FrankaSimNode, args)
