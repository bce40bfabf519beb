"""A robot declares its runtime nodes as data (RobotSpec.runtime_nodes), from its own configuration,
and builds its runtime from proxies of them (RobotSpec.runtime_from_nodes): what a ROS deployment
starts and reaches is the robot's to say, not a launch file's."""

from __future__ import annotations

from pathlib import Path

import pytest

from rpent.robot import load_robot
from rpent.runner.options import run_option_parser
from rpent.runtime.types import Pose
from rpent.tools.events import NullEventSink

SAFETY = Path(__file__).resolve().parents[2] / "config" / "franka_safety.yaml"


def _flags(robot: str, *argv: str):
    spec = load_robot(robot).get_robot_spec()
    return spec, run_option_parser(spec).parse_args(["--robot", robot, *argv])


def _deployment(tmp_path: Path) -> Path:
    path = tmp_path / "lab.yaml"
    path.write_text(f"""\
arms:
  - {{name: left, host: 10.0.0.2, gripper: true, base_xyz_m: [0.0, 0.3, 0.0]}}
  - {{name: right, host: 10.0.1.2, gripper: false, base_xyz_m: [0.0, -0.3, 0.0]}}
cameras:
  - {{name: overhead, device: 2}}
  - {{name: side, kind: realsense, serial: "123"}}
safety_file: {SAFETY}
""")
    return path


def test_real_cameras_and_arms_are_the_ones_the_deployment_yaml_names(tmp_path):
    config = _deployment(tmp_path)
    spec, args = _flags("dual_franka", "--config", str(config))
    parts = [(p.protocol, p.name, p.node_type, p.node_name, p.action_name) for p in spec.runtime_nodes(args)]
    assert parts == [
        ("camera", "overhead", "camera_node", "camera_overhead", "/camera_overhead/overhead/call"),
        ("camera", "side", "camera_node", "camera_side", "/camera_side/side/call"),
        ("arm", "left", "franka_arm_node", "arm_left", "/arm_left/left/call"),
        ("gripper", "left", "franka_gripper_node", "gripper_left", "/gripper_left/left/call"),
        ("arm", "right", "franka_arm_node", "arm_right", "/arm_right/right/call"),
    ]
    by_node = {p.node_name: dict(p.parameters) for p in spec.runtime_nodes(args)}
    # A camera node reads device, calibration and mount from the same YAML entry; arms get their FCI host.
    assert by_node["camera_side"] == {"name": "side", "config": str(config.resolve())}
    assert by_node["arm_right"]["ip"] == "10.0.1.2"
    # The arm node's own envelope checks the table and keep-out zones with the arm where the YAML places it,
    # as the toolkit's does (and rviz draws it there).
    assert (by_node["arm_left"]["base_xyz"], by_node["arm_right"]["base_xyz"]) == ([0.0, 0.3, 0.0], [0.0, -0.3, 0.0])


def test_with_sim_the_toolkit_and_the_arm_nodes_place_each_arm_where_the_simulator_puts_it(tmp_path):
    from robots.franka.sim.simulator import SimScene

    spec, args = _flags("dual_franka", "--sim", "--config", str(_deployment(tmp_path)), "--output-dir",
                        str(tmp_path / "run"))
    parts = spec.runtime_nodes(args)
    # The arm node's default placement is the scene's (robots.franka.ros.description.base_xyz_for).
    assert [dict(p.parameters).get("base_xyz") for p in parts if p.protocol == "arm"] == [None, None]
    runtime = spec.runtime_from_nodes(spec.parse_config(args), [(p, _Proxy(p.name)) for p in parts],
                                      events=NullEventSink())["runtime"]
    placed = tuple(tuple(runtime.arm(name).envelope.base_xyz_m) for name in ("left", "right"))
    assert placed == SimScene.dual().arm_positions != ((0.0, 0.3, 0.0), (0.0, -0.3, 0.0))  # not the YAML's


def test_with_sim_every_camera_is_served_by_the_simulator_node_and_covers_the_dashboard_views():
    spec, args = _flags("franka", "--sim")
    cameras = [p for p in spec.runtime_nodes(args) if p.protocol == "camera"]
    assert {p.node_name for p in cameras} == {"franka_sim"}
    assert {c.name for c in spec.dashboard.frame_channels} <= {p.name for p in cameras}
    assert cameras[0].parameters["arm_names"] == ["arm"]


def test_a_robot_without_runtime_nodes_declares_none():
    spec, args = _flags("toy")
    assert list(spec.runtime_nodes(args)) == []


class _Proxy:
    def __init__(self, name: str) -> None:
        self.name = name

    def capture(self) -> str:
        return f"picture from {self.name}"


def test_runtime_from_node_proxies_refuses_a_target_outside_the_envelope_before_any_goal_is_sent(tmp_path):
    spec, args = _flags("dual_franka", "--config", str(_deployment(tmp_path)), "--output-dir", str(tmp_path / "run"))
    config = spec.parse_config(args)
    parts = [(part, _Proxy(part.name)) for part in spec.runtime_nodes(args)]
    runtime_kwargs = spec.runtime_from_nodes(config, parts, events=NullEventSink())
    runtime = runtime_kwargs["runtime"]
    assert sorted(runtime.arms) == ["left", "right"] and sorted(runtime.grippers) == ["left"]
    assert [c.name for c in runtime.cameras] == ["overhead", "side"]
    assert runtime_kwargs["frame_sources"]["side"]() == "picture from side"
    with pytest.raises(ValueError, match=r"target\.z_m"):
        runtime.arm("left").envelope.check_pose(Pose(position=(0.5, 0.0, -1.0)))
