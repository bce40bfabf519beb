"""Every node declares its parameters with a description, a type and a rule (`ros2 param describe`
tells what each is); a bad value, or a name the node does not take, stops it at start with the
parameter's name and the rule, and no traceback.

Skipped where rclpy or the generated rpent interfaces cannot be imported.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading

import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")

from rcl_interfaces.msg import ParameterType  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402

from robots.franka.ros.arm_node import FrankaArmNode  # noqa: E402
from robots.franka.ros.camera_node import CameraNode  # noqa: E402
from robots.franka.ros.gripper_node import FrankaGripperNode  # noqa: E402
from rpent.robot import ConfigError  # noqa: E402
from rpent_ros.operator.mcp_bridge_node import McpBridgeNode  # noqa: E402
from rpent_ros.operator.planner_node import PlannerNode  # noqa: E402
from rpent_ros.params import RCLPY_PARAMETERS, declare_robot_parameters  # noqa: E402
from rpent_ros.toolkit.toolkit_node import toolkit_parameters  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.timeout(120)]


def _described(node: Node) -> dict[str, object]:
    names = [n for n in node.get_parameters_by_prefix("") if n not in RCLPY_PARAMETERS]
    return dict(zip(names, node.describe_parameters(names), strict=True))


def test_every_parameter_of_every_node_says_what_it_is_its_type_and_its_rule(ros, tmp_path):
    recipe = tmp_path / "look.jsonl"
    recipe.write_text('{"tool": "get_state", "arguments": {}}\n')
    nodes = [
        FrankaArmNode(), FrankaGripperNode(), CameraNode(), McpBridgeNode(),
        PlannerNode(parameter_overrides=[Parameter("recipe", value=str(recipe)),
                                         Parameter("output_dir", value=str(tmp_path / "planner"))]),
    ]
    for node in nodes:
        ros(node)
        described = _described(node)
        assert len(described) >= 2, node.get_name()
        for name, descriptor in described.items():
            where = f"{node.get_name()}.{name}"
            assert descriptor.description, f"{where}: no description"
            assert descriptor.type != ParameterType.PARAMETER_NOT_SET, f"{where}: no type"
            assert descriptor.read_only, f"{where}: read once at start, so read-only"
            assert descriptor.additional_constraints.startswith("must be "), f"{where}: no rule"
    arm = _described(nodes[0])
    assert arm["publish_rate_hz"].type == ParameterType.PARAMETER_DOUBLE
    (rate,) = arm["publish_rate_hz"].floating_point_range
    assert (rate.from_value, rate.to_value) == (0.1, 1000.0)
    assert arm["base_xyz"].type == ParameterType.PARAMETER_DOUBLE_ARRAY
    assert _described(nodes[2])["kind"].additional_constraints == "must be one of opencv, realsense"
    # A robot's flags are the planner's parameters, described from their help, typed from their definition.
    planner = _described(nodes[-1])
    assert planner["speed"].type == ParameterType.PARAMETER_DOUBLE and "gripper speed in m/s" in planner["speed"].description
    assert planner["max_turns"].type == ParameterType.PARAMETER_INTEGER
    assert planner["planner"].additional_constraints == "must be one of api, claude_code, codex, replay or package.module:Class"


def test_values_a_launch_file_writes_as_integers_are_taken_for_numbers(ros):
    node = ros(FrankaArmNode(parameter_overrides=[
        Parameter("publish_rate_hz", value=20), Parameter("base_xyz", value=[0, 1, 0]),
    ]))
    assert node.params["publish_rate_hz"] == 20.0 and node.params["base_xyz"] == [0.0, 1.0, 0.0]
    assert node.get_parameter("publish_rate_hz").type_ == Parameter.Type.DOUBLE


@pytest.mark.parametrize(("override", "message"), [
    (("publish_rate_hz", -5.0), "parameter publish_rate_hz: must be a number from 0.1 to 1000, got -5.0"),
    (("publish_rate_hz", "fast"), "parameter publish_rate_hz: must be a number from 0.1 to 1000, got 'fast'"),
    (("dynamics_factor", 2.0), "parameter dynamics_factor: must be a number from 0.01 to 1, got 2.0"),
    # An arm's base stands unrotated (the envelope's world-frame checks take it so): no rotation is taken.
    (("base_rpy", [0.0, 0.0, 1.57]), "parameter base_rpy: not a parameter of node franka_arm (it takes: base_xyz,"),
    (("ip", 7), "parameter ip: must be text, got 7"),
    (("publish_rate", 5.0), "parameter publish_rate: not a parameter of node franka_arm (it takes: base_xyz,"),
])
def test_a_bad_value_or_an_unknown_name_is_refused_naming_the_parameter_and_its_rule(ros, override, message):
    with pytest.raises(ConfigError) as refused:
        FrankaArmNode(parameter_overrides=[Parameter(override[0], value=override[1])])
    assert str(refused.value).startswith(message)


def test_the_toolkit_parameters_and_its_robots_flags_declare_with_their_rules(ros, tmp_path):
    node = ros(Node("toolkit", automatically_declare_parameters_from_overrides=True, parameter_overrides=[
        Parameter("robot", value="toy"), Parameter("speed", value=1), Parameter("max_goals", value=32),
    ]))
    found = declare_robot_parameters(node, toolkit_parameters())
    assert found.values["max_goals"] == 32 and found.values["runtime_mode"] == "inprocess"
    assert found.spec.name == "toy" and found.namespace.speed == 1.0
    described = _described(node)
    assert "robot package" in described["robot"].description and described["robot"].read_only
    assert described["max_goals"].integer_range[0].from_value == 1
    for bad, message in ((("max_goals", 0), "parameter max_goals: must be an integer from 1 to 100000, got 0"),
                         (("robot", "no_such_robot"), "parameter robot: "),
                         (("runtime_mode", "remote"), "parameter runtime_mode: must be one of inprocess, ros, got 'remote'")):
        other = Node("toolkit_" + bad[0], automatically_declare_parameters_from_overrides=True,
                     parameter_overrides=[Parameter(bad[0], value=bad[1])])
        try:
            with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(")):
                declare_robot_parameters(other, toolkit_parameters())
        finally:
            other.destroy_node()


def _start(code: str, *ros_args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, "--ros-args", *ros_args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize(("code", "args", "message"), [
    ("from robots.franka.ros.arm_node import franka_arm_main as m; m()", ("-p", "publish_rate_hz:=-5.0"),
     "franka_arm_node: parameter publish_rate_hz: must be a number from 0.1 to 1000, got -5.0"),
    ("from rpent_ros.operator.planner_node import main as m; m()", ("-p", "robot:=toy", "-p", "speeed:=1.0"),
     "planner_node: parameter speeed: not a parameter of node planner"),
    ("from rpent_ros.operator.planner_node import main as m; m()", ("-p", "robot:=toy", "-p", "recipe:=robots/toy/missing.jsonl"),
     "planner_node: parameter recipe: cannot read robots/toy/missing.jsonl"),
    ("from rpent_ros.operator.mcp_bridge_node import main as m; m()", ("-p", "transport:=tcp",),
     "mcp_bridge_node: parameter transport: must be one of stdio, http, got 'tcp'"),
])
def test_a_node_refused_at_start_exits_2_naming_the_parameter_without_a_traceback(tmp_path, code, args, message):
    done = _start(code, *args, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ros2") is None, reason="the ros2 command is not on PATH")
def test_ros2_param_describe_tells_what_a_parameter_is(tmp_path):
    # An arm node starts unconfigured: it serves its parameters before it connects to anything.
    node = subprocess.Popen([sys.executable, "-c", "from robots.franka.ros.arm_node import franka_arm_main as m; m()",
                             "--ros-args", "-r", "__node:=arm_described"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        up = threading.Event()
        threading.Thread(target=lambda: any(("unconfigured" in line and not up.set()) for line in node.stdout),
                         daemon=True).start()
        assert up.wait(60), "the arm node did not start"
        described = subprocess.run(["ros2", "param", "describe", "/arm_described", "publish_rate_hz"],
                                   capture_output=True, text=True, timeout=60).stdout
        for line in ("Type: double", "Description: joint states and TF per second", "Read only: true",
                     "Min value: 0.1", "Max value: 1000.0", "must be a number from 0.1 to 1000"):
            assert line in described, described
    finally:
        os.killpg(node.pid, signal.SIGINT)
        node.wait(30)


def test_the_toolkit_node_says_what_each_parameter_is(ros, tmp_path):
    from rpent_ros.toolkit.toolkit_node import ToolkitNode

    node = ros(ToolkitNode(parameter_overrides=[Parameter("robot", value="toy"),
                                                Parameter("output_dir", value=str(tmp_path / "node"))]))
    described = _described(node)
    assert "robot package robots.<name>" in described["robot"].description  # `ros2 param describe /toolkit robot`
    assert described["speed"].type == ParameterType.PARAMETER_DOUBLE
    assert described["runtime_mode"].additional_constraints == "must be one of inprocess, ros"
    assert all(d.description and d.read_only for d in described.values())
    with pytest.raises(ConfigError, match=r"^parameter speed: "):  # the robot's own rule, worded for the parameter
        ToolkitNode(parameter_overrides=[Parameter("robot", value="toy"), Parameter("speed", value=5.0),
                                         Parameter("output_dir", value=str(tmp_path / "other"))])
