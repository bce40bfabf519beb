"""The house's layering (ARCHITECTURE.md, "Rules of the house"), checked on every import in the tree.

Every `import`, `from ... import` (module level, inside functions, under TYPE_CHECKING) and
`importlib.import_module("literal")` / `__import__("literal")` in rpent/, rpent_ros/ and robots/
is read with `ast`, without importing anything, and each one that points outward fails the test
with the file, the line, the import and the rule it breaks.

The layering is data (LAYERS, ROBOT_ROS, FORBIDDEN): change the rules there, not in the walker
(import_reading.py). The other structure rules are test_architecture_units.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from import_reading import PACKAGES, ROOT, Import, imports_in, module_name, write_tree

# Module prefix -> layer; the longest matching prefix wins, so `rpent.planner` beats `rpent`.
LAYERS: dict[str, str] = {
    "rpent": "core",  # rpent's top-level modules (settings, loopback, ...) and its core packages
    "rpent.tools": "core",
    "rpent.robot": "core",
    "rpent.runtime": "core",
    "rpent.memory": "core",
    "rpent.rpc": "core",
    "rpent.rpc.transport": "rpc_transport",  # rpent.rpc's rooms: core, and transports below facades
    "rpent.rpc.facades": "rpc_facades",
    "rpent.record": "record",  # the run's record: below the toolkit that writes it
    "rpent.planner": "planner",
    "rpent.mcp": "mcp",
    "rpent.runner": "runner",
    "rpent.eval": "eval",
    "rpent.dashboard": "dashboard",
    "rpent.cli": "cli",
    "rpent.__main__": "entry",
    "rpent_ros": "ros",
    # The ROS client libraries and message packages: rpent_ros's to import. rosidl installs the
    # generated interfaces into the rpent package: they are ROS, not core.
    **dict.fromkeys(("rpent.msg", "rpent.srv", "rpent.action", "rclpy", "rcl_interfaces", "rosidl_runtime_py",
                     "builtin_interfaces", "action_msgs", "std_msgs", "sensor_msgs", "geometry_msgs",
                     "lifecycle_msgs", "diagnostic_msgs", "tf2_ros", "tf2_msgs", "visualization_msgs", "sensor_msgs_py",
                     "launch", "launch_ros", "ament_index_python"), "ros_client"),
    "robots": "robots",
}
#: A robot's own ROS package, `robots.<name>.ros` (its nodes, built on rpent_ros): any robot's, by the
#: pattern, so adding a robot edits nothing here. It beats LAYERS.
ROBOT_ROS = re.compile(r"^(robots\.[A-Za-z_][A-Za-z0-9_]*\.ros)(\.|$)")

# Layer -> {forbidden target layer: why}. Everything above a layer is forbidden to it.
_OUTWARD = "rpent imports neither robots nor ROS: robots are found by name, ROS lives in rpent_ros"
_CLI = "only rpent/__main__.py imports rpent.cli: the cli parses arguments and prints, nothing builds on it"
_ROBOT_ROS_LOADED = ("a robot's ROS package (robots.<name>.ros) is loaded only by rpent_ros, by name "
                     "(rpent_ros/runtime/robot_ros.py), and imported only from within itself")
FORBIDDEN: dict[str, dict[str, str]] = {
    "core": {
        "dashboard": "core publishes through rpent.tools.events.DashboardEventSink, it never imports the dashboard",
        "planner": "core is below the planners: the async bridge lives in rpent.tools, planners re-export it",
        "mcp": "core is below the MCP bridge",
        "runner": "core is below run orchestration",
        "cli": _CLI,
        "robots": _OUTWARD,
        "ros": _OUTWARD,
    },
    "planner": {"robots": _OUTWARD, "ros": _OUTWARD, "cli": _CLI,
                "runner": "planners are run by the runner, not the other way round",
                "dashboard": "planners reach the operator through OperatorInput, not the dashboard"},
    "mcp": {"planner": "planners use MCP: the bridge must not import them back (execute_tool and the "
                       "stream reader are core)",
            "cli": _CLI, "robots": _OUTWARD, "ros": _OUTWARD,
            "runner": "the runner runs planners, which use MCP: the bridge must not import it back "
                      "(serve-mcp's command, which builds a robot as `rpent run` does, is rpent.cli's)",
            "dashboard": "the MCP bridge serves a toolkit; the dashboard is above it"},
    "runner": {"cli": _CLI, "robots": _OUTWARD, "ros": _OUTWARD,
               "dashboard": "the dashboard uses the runner; the run options are defined in rpent.runner"},
    "eval": {"cli": _CLI, "robots": _OUTWARD, "ros": _OUTWARD,
             "dashboard": "a sweep runs episodes through the runner; the dashboard is not part of it"},
    "dashboard": {"cli": _CLI, "robots": "the dashboard serves any robot through RobotSpec and the Toolkit API",
                  "ros": _OUTWARD},
    "cli": {"robots": _OUTWARD, "ros": _OUTWARD},
    "entry": {"robots": _OUTWARD, "ros": _OUTWARD},
    "robots": {"ros": "robots run without ROS: only rpent_ros and a robot's own robots.<name>.ros import "
                      "rpent_ros; a robot declares its runtime nodes as data (RobotSpec.runtime_nodes)",
               "robot_ros": _ROBOT_ROS_LOADED,
               "cli": _CLI,
               "dashboard": "a robot describes its dashboard as data (rpent.robot); the dashboard is above robots"},
    "robot_ros": {"ros_client": "a robot's ROS package builds on rpent_ros (ManagedRuntimeNode, RuntimeNode, "
                                "ArmTelemetry, ...): what touches rclpy or a message package is rpent_ros's",
                  "robot_ros": "a robot's ROS package imports no other robot's",
                  "cli": _CLI, "dashboard": "a robot describes its dashboard as data (rpent.robot)"},
    "ros": {"cli": _CLI,
            "robots": "rpent_ros imports no robot (lazily or under TYPE_CHECKING neither): robots are found by "
                      "name, and a robot's nodes are its own (robots.<name>.ros, loaded by rpent_ros.runtime.robot_ros)",
            "robot_ros": _ROBOT_ROS_LOADED},
    "record": {**{layer: "the record is below the toolkit: rpent.tools and everything above write it, rpent.record "
                         "imports none of them" for layer in ("core", "planner", "mcp", "runner", "eval", "dashboard",
                                                               "cli", "entry")},
               "robots": _OUTWARD, "ros": _OUTWARD},
}
# rpent.rpc's two rooms are core: they keep core's rules, a layer that may not import core may not
# import them either, and the transports carry calls for any facade.
for _rules in FORBIDDEN.values():
    if "core" in _rules:
        _rules.update(rpc_transport=_rules["core"], rpc_facades=_rules["core"])
# What may not import rpent_ros may not import the ROS client libraries either; what may not import
# robots may not import a robot's ROS package.
for _rules in FORBIDDEN.values():
    if "ros" in _rules:
        _rules.setdefault("ros_client", _rules["ros"])
    if "robots" in _rules:
        _rules.setdefault("robot_ros", _rules["robots"])
FORBIDDEN["rpc_facades"] = dict(FORBIDDEN["core"])
FORBIDDEN["rpc_transport"] = {**FORBIDDEN["core"], "rpc_facades": "transports carry calls for any facade: "
                              "rpent.rpc.facades builds on rpent.rpc.transport, never the other way round"}


@dataclass(frozen=True)
class Violation:
    found: Import
    importer: str
    imported: str
    rule: str

    def __str__(self) -> str:
        return (f"{self.found.path}:{self.found.line}: `{self.found.source}` -> {self.importer} imports "
                f"{self.imported}, which is forbidden: {self.rule}")


def layer_of(module: str) -> str | None:
    if ROBOT_ROS.match(module):
        return "robot_ros"
    best = None
    for prefix, layer in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return None if best is None else best[1]


def _robot_ros_of(module: str) -> str | None:
    match = ROBOT_ROS.match(module)
    return match.group(1) if match else None


def violations(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[Violation]:
    found: dict[tuple[str, int, str], Violation] = {}  # one per statement and layer, not per imported name
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            importer = module_name(root, path)
            importer_layer = layer_of(importer)
            rules = FORBIDDEN.get(importer_layer or "", {})
            source = path.read_text(encoding="utf-8")
            rel = str(path.relative_to(root))
            for imp in imports_in(source, importer, path=rel, is_package=path.name == "__init__.py"):
                target_layer = layer_of(imp.target)
                if target_layer == "robot_ros" and _robot_ros_of(imp.target) == _robot_ros_of(importer):
                    continue  # a robot's ROS package imports itself
                if target_layer in rules:
                    found.setdefault((imp.path, imp.line, target_layer or ""),
                                     Violation(imp, importer_layer or "", target_layer or "", rules[target_layer]))
    return list(found.values())


def test_no_import_points_outward():
    found = violations(ROOT)
    if found:
        pytest.fail("forbidden imports:\n" + "\n".join(map(str, found)), pytrace=False)


def test_every_layer_with_rules_is_a_layer_modules_belong_to():
    # A typo in FORBIDDEN (a layer no module maps to) would silently check nothing.
    layers = set(LAYERS.values()) | {"robot_ros"}  # robot_ros: by the ROBOT_ROS pattern
    assert set(FORBIDDEN) <= layers
    assert all(set(rules) <= layers for rules in FORBIDDEN.values())


def test_checker_names_file_line_import_and_rule_of_a_lazy_upward_import(tmp_path):
    root = write_tree(tmp_path, {
        "rpent/__init__.py": "",
        "rpent/tools/__init__.py": "",
        "rpent/tools/toolkit.py": """\
            import json


            def publish():
                from rpent.dashboard.events import DashboardEventSink
                return DashboardEventSink
            """,
    })
    found = violations(root)
    assert [str(v) for v in found] == [
        "rpent/tools/toolkit.py:5: `from rpent.dashboard.events import DashboardEventSink` -> core imports "
        "dashboard, which is forbidden: " + FORBIDDEN["core"]["dashboard"]
    ]


def test_checker_catches_each_way_of_writing_an_import(tmp_path):
    root = write_tree(tmp_path, {
        "rpent/__init__.py": "",
        "rpent/mcp/__init__.py": "",
        "rpent/mcp/bridge.py": """\
            import importlib
            from typing import TYPE_CHECKING

            from .. import planner
            import rpent.cli.main as cli
            if TYPE_CHECKING:
                from rpent.planner.base import Planner


            def later():
                return importlib.import_module("rpent.planner.api"), __import__("rclpy")


            def serve():
                from rpent.runner.logs import setup_console
                return setup_console
            """,
        "robots/__init__.py": "",
        "robots/arm/__init__.py": "from rclpy.node import Node\n",
        "rpent_ros/__init__.py": "",
        "rpent_ros/node.py": "from rpent.cli.main import build_parser\n",
    })
    found = {(v.found.path, v.found.line, v.found.target, v.imported) for v in violations(root)}
    assert found == {
        ("rpent/mcp/bridge.py", 4, "rpent.planner", "planner"),
        ("rpent/mcp/bridge.py", 5, "rpent.cli.main", "cli"),
        ("rpent/mcp/bridge.py", 7, "rpent.planner.base.Planner", "planner"),
        ("rpent/mcp/bridge.py", 11, "rpent.planner.api", "planner"),
        ("rpent/mcp/bridge.py", 11, "rclpy", "ros_client"),
        ("rpent/mcp/bridge.py", 15, "rpent.runner.logs.setup_console", "runner"),
        ("robots/arm/__init__.py", 1, "rclpy.node.Node", "ros_client"),
        ("rpent_ros/node.py", 1, "rpent.cli.main.build_parser", "cli"),
    }


def test_checker_keeps_rpc_transports_below_the_facades(tmp_path):
    root = write_tree(tmp_path, {
        "rpent/__init__.py": "",
        "rpent/rpc/__init__.py": "",
        "rpent/rpc/transport/__init__.py": "",
        "rpent/rpc/transport/client.py": "from rpent.rpc.errors import RpcError\nfrom rpent.rpc.facades.env import BaseEnvClient\n",
        "rpent/rpc/facades/__init__.py": "",
        "rpent/rpc/facades/env.py": "from rpent.rpc.facade import RpcFacade\nfrom rpent.rpc.transport.client import RpcClient\n",
    })
    assert [(v.found.path, v.found.line, v.importer, v.imported) for v in violations(root)] == [
        ("rpent/rpc/transport/client.py", 2, "rpc_transport", "rpc_facades"),
    ]


def test_checker_allows_inward_imports_and_discovery_by_name(tmp_path):
    root = write_tree(tmp_path, {
        "rpent/__init__.py": "",
        "rpent/__main__.py": "from rpent.cli.main import main\n",
        "rpent/robot/discovery.py": """\
            import importlib


            def load(name):
                return importlib.import_module(f"robots.{name}")
            """,
        "rpent/planner/base.py": "from rpent.tools.async_call import execute_tool\nfrom rpent import settings\n",
        "robots/arm/tools.py": "from rpent.tools import tool\nfrom robots.arm import runtime\n",
        "rpent_ros/proxies.py": "import rclpy\nfrom rpent.runtime import Arm\n",
    })
    assert violations(root) == []


def test_checker_names_a_record_module_that_imports_the_toolkit(tmp_path):
    root = write_tree(tmp_path, {
        "rpent/__init__.py": "",
        "rpent/record/__init__.py": "",
        "rpent/record/steps.py": "from rpent.record.values import json_default\nfrom rpent.tools.result import ToolResult\n",
        "rpent/tools/toolkit.py": "from rpent.record.steps import StepLog\n",
    })
    assert [str(v) for v in violations(root)] == [
        "rpent/record/steps.py:2: `from rpent.tools.result import ToolResult` -> record imports core, which is "
        "forbidden: " + FORBIDDEN["record"]["core"]
    ]


# -- a robot's ROS nodes are the robot's ----------------------------------------------------------

#: A robot (named `crane`, listed nowhere) whose ROS package keeps the rules: its nodes build on rpent_ros
#: and import the robot and each other; rpent_ros reaches them only by a name computed at run time.
_ROBOT_ROS = {
    "rpent/__init__.py": "",
    "robots/__init__.py": "",
    "robots/crane/__init__.py": "",
    "robots/crane/config.py": "import json\n",
    "robots/crane/ros/__init__.py": "",
    "robots/crane/ros/hoist_node.py": "from robots.crane.config import json\nfrom robots.crane.ros.params import NAME\n"
                                      "from rpent_ros.runtime.managed_node import ManagedRuntimeNode\n",
    "robots/crane/ros/params.py": "from rpent_ros.params import Param\n",
    "rpent_ros/__init__.py": "",
    "rpent_ros/runtime/robot_ros.py": "import importlib\n\n\ndef load(package):\n"
                                      "    return importlib.import_module(f\"{package}.ros\")\n",
}


def _planted(tmp_path: Path, module: str, line: str) -> list[tuple[str, str, str]]:
    assert violations(write_tree(tmp_path / "kept", _ROBOT_ROS)) == []
    root = write_tree(tmp_path / "planted", {**_ROBOT_ROS, module: line})
    return [(v.found.path, v.importer, v.imported) for v in violations(root)]


@pytest.mark.parametrize(("line", "imported"), [
    ("from robots.crane.config import json\n", "robots"),  # module level
    ("def node():\n    from robots.crane.ros.hoist_node import HoistNode\n    return HoistNode\n", "robot_ros"),  # lazy
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from robots.crane.config import json\n", "robots"),
    ("import importlib\nimportlib.import_module(\"robots.crane.ros\")\n", "robot_ros"),  # a literal name imports
])
def test_robot_ros_rule_fails_on_rpent_ros_importing_a_robot(tmp_path, line, imported):
    module = "rpent_ros/toolkit/toolkit_node.py"
    assert _planted(tmp_path, module, line) == [(module, "ros", imported)]


@pytest.mark.parametrize("line", ["import rclpy\n", "from sensor_msgs.msg import JointState\n",
                                  "def later():\n    from rpent.action import RuntimeCall\n    return RuntimeCall\n"])
def test_robot_ros_rule_fails_on_a_robots_ros_package_importing_ros_client_libraries(tmp_path, line):
    assert _planted(tmp_path, "robots/crane/ros/hoist_node.py", line) == [
        ("robots/crane/ros/hoist_node.py", "robot_ros", "ros_client")]


@pytest.mark.parametrize(("module", "line", "imported"), [
    ("robots/crane/tools.py", "from robots.crane.ros.hoist_node import HoistNode\n", "robot_ros"),
    ("robots/crane/tools.py", "from rpent_ros.params import Param\n", "ros"),
    ("robots/crane/tools.py", "import rclpy\n", "ros_client"),
    ("robots/barge/ros/winch_node.py", "from robots.crane.ros.params import NAME\n", "robot_ros"),
    ("rpent/robot/discovery.py", "from robots.crane.ros import hoist_node\n", "robot_ros"),
])
def test_robot_ros_rule_fails_on_anything_else_importing_a_robots_ros_package_or_ros(tmp_path, module, line, imported):
    found = _planted(tmp_path, module, line)
    assert [(path, what) for path, _, what in found] == [(module, imported)]
