"""The Franka runtime as runtime nodes: the parts a ROS deployment starts, and the runtime built from their proxies.

The node executables named here are the Franka's own (robots/franka/ros/scripts).

Arms and grippers each get a node; cameras come from the deployment YAML (a camera node each) or,
with --sim, from the simulated scene, whose cameras must render in the simulator's own node.
Cameras are listed first so a launch starts the simulator before the arms that connect to it. With a
`vla_endpoint`, each arm gets a vla_client_node too (robots.franka.policy.loop runs there; the arm
node streams each chunk's steps).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from robots.franka.config import FrankaConfig
from rpent.robot import RunConfig
from rpent.robot.components import RuntimeNodeComponent


def runtime_nodes(franka: FrankaConfig, args: argparse.Namespace, config_file: Path) -> list[RuntimeNodeComponent]:
    parts = _sim_cameras(franka) if getattr(args, "sim", False) else [
        # The camera node reads device, calibration and mount from the same YAML entry.
        RuntimeNodeComponent(cam.name, "camera", "camera_node", f"camera_{cam.name}",
                             {"name": cam.name, "config": str(config_file.resolve())})
        for cam in franka.cameras
    ]
    sim = getattr(args, "sim", False)
    for arm in franka.arms:
        realtime = "auto" if arm.realtime is None or sim else ("enforce" if arm.realtime else "ignore")
        # The arm node's envelope checks the table and the keep-out zones with the arm where the toolkit's
        # does: at the YAML's base_xyz_m, or with --sim where the simulator puts it (the node's default).
        placement = {} if sim else {"base_xyz": list(arm.base_xyz_m)}
        parts.append(RuntimeNodeComponent(arm.name, "arm", "franka_arm_node", f"arm_{arm.name}",
                                          {"name": arm.name, "ip": arm.host, "dynamics_factor": arm.dynamics_factor,
                                           "realtime": realtime, **placement}))
        if arm.gripper:
            parts.append(RuntimeNodeComponent(arm.name, "gripper", "franka_gripper_node", f"gripper_{arm.name}",
                                              {"name": arm.name, "ip": arm.host}))
    return parts + (_policies(franka, parts, config_file) if franka.vla_endpoint else [])


def _policies(franka: FrankaConfig, parts: list[RuntimeNodeComponent], config_file: Path) -> list[RuntimeNodeComponent]:
    """A vla_client_node per arm: it holds the policy connection and reaches its arm, hand and cameras by
    their actions; the arm node runs each chunk's control steps beside the arm."""
    from rpent.robot import ConfigError

    actions = {(p.protocol, p.name): p.action_name for p in parts}

    def camera(name: str, setting: str) -> str:
        if ("camera", name) not in actions:
            known = sorted(n for kind, n in actions if kind == "camera")
            raise ConfigError(f"{setting}: no camera named {name!r} (cameras: {known})")
        return actions[("camera", name)]

    policy = franka.policy
    return [
        RuntimeNodeComponent(arm.name, "policy", "vla_client_node", f"vla_{arm.name}", {
            "name": arm.name, "endpoint": franka.vla_endpoint, "config": str(config_file.resolve()),
            "arm_action": actions[("arm", arm.name)], "gripper_action": actions.get(("gripper", arm.name), ""),
            "exterior_camera_action": camera(policy.exterior_camera, "policy.exterior_camera"),
            "wrist_camera_action": camera(policy.wrist_camera(arm.name, len(franka.arms)), f"policy.wrist_cameras.{arm.name}"),
        })
        for arm in franka.arms
    ]


def _sim_cameras(franka: FrankaConfig) -> list[RuntimeNodeComponent]:
    scene = _sim_scene(franka)
    node = {"arms": len(franka.arms), "arm_names": [a.name for a in franka.arms],
            "camera_width": franka.sim_camera_width, "camera_height": franka.sim_camera_height}
    names = [c.name for c in scene.cameras] + [c.name for c in scene.wrist_cameras]  # the in-process order
    # franka_sim_node is a plain node: the simulator and its cameras serve from its start.
    return [RuntimeNodeComponent(name, "camera", "franka_sim_node", "franka_sim", node, managed=False) for name in names]


def _sim_scene(franka: FrankaConfig) -> Any:
    """The scene franka_sim_node simulates for these arms."""
    from robots.franka.sim.simulator import SimScene

    return SimScene() if len(franka.arms) == 1 else SimScene.dual()


def runtime_from_nodes(config: RunConfig, parts: Sequence[tuple[RuntimeNodeComponent, Any]], *,
                       approval: Any) -> dict[str, Any]:
    """init_runtime's result over proxies; the safety envelope is checked here before a goal is sent
    and again in the arm node."""
    from robots.franka.runtime import FrankaRuntime

    franka: FrankaConfig = config.options["franka"]
    safety = franka.safety()
    arm_configs = {a.name: a for a in franka.arms}
    if config.options["sim"]:  # the simulated scene is the truth of where each arm stands, as in process
        arm_configs = {a.name: a.model_copy(update={"base_xyz_m": position})
                       for a, position in zip(franka.arms, _sim_scene(franka).arm_positions, strict=True)}
    runtime = FrankaRuntime(arms={}, grippers={}, cameras=[], arm_configs=arm_configs, safety=safety)
    runtime.video_fps = config.options.get("video_fps", 0.0)
    runtime.approval = approval  # motions that need approval ask here (the dashboard node's operator)
    for part, proxy in parts:
        if part.protocol == "camera":
            runtime.cameras.append(proxy)
            continue
        if part.protocol == "policy":
            runtime.policies[part.name] = proxy
            continue
        # The tools check every target against the arm's envelope before anything moves.
        proxy.envelope = safety.envelope(part.name, arm_configs[part.name].base_xyz_m)
        (runtime.arms if part.protocol == "arm" else runtime.grippers)[part.name] = proxy
    return {"runtime": runtime, "frame_sources": {c.name: c.capture for c in runtime.cameras}}
