"""dual_franka.launch.py starts the runtime nodes its robot declares for the deployment YAML it is
given: one camera node per camera the YAML names, an arm and a gripper node per arm (no literals)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("launch_ros", reason="launch_ros not importable: ROS 2 is not sourced")

from launch_ros.actions import Node

from rpent.robot import ConfigError, load_robot
from rpent.runner.options import run_option_parser
from rpent_ros.launch_graph import GRAPH_ARGUMENTS
from rpent_ros.launch_helpers import DASHBOARD_ARGUMENTS, PLANNER_ARGUMENTS
from rpent_ros.runtime.remote import declared_parts

pytestmark = pytest.mark.ros
ROOT = Path(__file__).resolve().parents[2]


def _launch_file(name: str):
    spec = importlib.util.spec_from_file_location(name.replace(".", "_"), ROOT / "launch" / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nodes(launch, **values: str) -> dict[str, str]:
    """Node name -> executable of what the launch file would start with these arguments."""
    defaults = {n: d for n, d, _ in [*launch.ARGUMENTS, *PLANNER_ARGUMENTS, *DASHBOARD_ARGUMENTS, *GRAPH_ARGUMENTS]}
    actions = launch._nodes(lambda name: values.get(name, defaults[name]))
    # launch_ros exposes a node's name only once the launch has run it; the constructor's is what we set.
    return {action._Node__node_name: action.node_executable for action in actions if isinstance(action, Node)}


def test_real_arm_launch_starts_a_camera_node_per_camera_of_the_deployment_yaml(tmp_path):
    config = tmp_path / "lab.yaml"
    config.write_text(f"""\
arms:
  - {{name: left, host: 10.0.0.2, base_xyz_m: [0.0, 0.3, 0.0]}}
  - {{name: right, host: 10.0.1.2, gripper: false, base_xyz_m: [0.0, -0.3, 0.0]}}
cameras:
  - {{name: overhead, device: 2}}
  - {{name: side, device: 3}}
safety_file: {ROOT / "config" / "franka_safety.yaml"}
""")
    nodes = _nodes(_launch_file("dual_franka.launch.py"), config=str(config))
    assert nodes == {
        "camera_overhead": "camera_node", "camera_side": "camera_node",
        "arm_left": "franka_arm_node", "gripper_left": "franka_gripper_node", "arm_right": "franka_arm_node",
        "toolkit": "toolkit_node",
    }


def test_sim_launch_starts_one_simulator_node_for_every_camera():
    nodes = _nodes(_launch_file("dual_franka.launch.py"), use_sim="true")
    assert nodes == {
        "franka_sim": "franka_sim_node",
        "arm_left": "franka_arm_node", "gripper_left": "franka_gripper_node",
        "arm_right": "franka_arm_node", "gripper_right": "franka_gripper_node",
        "toolkit": "toolkit_node",
    }


def test_runtime_mode_ros_for_a_robot_that_declares_no_runtime_nodes_is_refused_naming_the_parameter():
    spec = load_robot("toy").get_robot_spec()
    with pytest.raises(ConfigError, match=r"parameter runtime_mode: 'ros' needs runtime nodes, and robot 'toy' declares none"):
        declared_parts(spec, run_option_parser(spec).parse_args(["--robot", "toy"]))


@pytest.mark.parametrize("launch_file", ["dual_franka.launch.py", "franka.launch.py"])
def test_an_argument_the_launch_file_does_not_take_is_refused_naming_it(launch_file):
    """`ros2 launch` passes any `name:=value` on as a configuration: a typo, or an argument a release
    dropped (dual_franka's left_base_xyz: an arm stands where its YAML puts it), would be ignored unseen."""
    from launch import LaunchContext

    *declared, build = _launch_file(launch_file).generate_launch_description().entities
    context = LaunchContext()
    for argument in declared:
        argument.execute(context)  # the defaults, as the launch sets them before building
    context.launch_configurations["left_base_xyz"] = "[0.0, 0.3, 0.0]"
    with pytest.raises(ValueError, match=r"^launch argument left_base_xyz: not an argument of this launch file "):
        build.execute(context)
