"""The house's layering (ARCHITECTURE.md, "Rules of the house"), checked on every import in the tree.

Every `import`, `from ... import` (module level, inside functions, under TYPE_CHECKING) and
`importlib.import_module("literal")` / `__import__("literal")` in rpent/, rpent_ros/ and robots/
is read with `ast`, without importing anything, and each one that points outward fails the test
with the file, the line, the import and the rule it breaks.

The layering is data (LAYERS, FORBIDDEN): change the rules there, not in the walker.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rpent", "rpent_ros", "robots")

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
    # rosidl installs the generated interfaces into the rpent package: they are ROS, not core.
    "rpent.msg": "ros",
    "rpent.srv": "ros",
    "rpent.action": "ros",
    "rpent_ros": "ros",
    "rclpy": "ros",
    "rcl_interfaces": "ros",
    "rosidl_runtime_py": "ros",
    "builtin_interfaces": "ros",
    "action_msgs": "ros",
    "std_msgs": "ros",
    "sensor_msgs": "ros",
    "geometry_msgs": "ros",
    "lifecycle_msgs": "ros",
    "diagnostic_msgs": "ros",
    "tf2_ros": "ros",
    "tf2_msgs": "ros",
    "launch": "ros",
    "launch_ros": "ros",
    "ament_index_python": "ros",
    "robots": "robots",
}

# Layer -> {forbidden target layer: why}. Everything above a layer is forbidden to it.
_OUTWARD = "rpent imports neither robots nor ROS: robots are found by name, ROS lives in rpent_ros"
_CLI = "only rpent/__main__.py imports rpent.cli: the cli parses arguments and prints, nothing builds on it"
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
    "robots": {"ros": "robots run without ROS: only rpent_ros imports rclpy; a robot declares its runtime "
                      "nodes as data (RobotSpec.runtime_nodes)",
               "cli": _CLI,
               "dashboard": "a robot describes its dashboard as data (rpent.robot); the dashboard is above robots"},
    "ros": {"cli": _CLI},
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
FORBIDDEN["rpc_facades"] = dict(FORBIDDEN["core"])
FORBIDDEN["rpc_transport"] = {**FORBIDDEN["core"], "rpc_facades": "transports carry calls for any facade: "
                              "rpent.rpc.facades builds on rpent.rpc.transport, never the other way round"}


@dataclass(frozen=True)
class Import:
    path: str  # relative to the scanned root
    line: int
    source: str  # the import as written
    target: str  # absolute dotted module it names


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
    best = None
    for prefix, layer in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[0])):
            best = (prefix, layer)
    return None if best is None else best[1]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str | None, level: int, importer: str, is_package: bool) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _literal_import(node: ast.Call) -> str | None:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str) and not first.value.startswith("."):
        return first.value
    return None  # a name built at run time: discovery by name, which the rules allow


def imports_in(source: str, importer: str, *, path: str, is_package: bool = False) -> Iterator[Import]:
    tree = ast.parse(source, filename=path)
    lines = source.splitlines()
    for node in ast.walk(tree):
        written = lines[node.lineno - 1].strip() if hasattr(node, "lineno") else ""
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(path, node.lineno, written, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node.module, node.level, importer, is_package)
            for alias in node.names:
                # `from rpent import dashboard` names the package rpent.dashboard, not rpent.
                yield Import(path, node.lineno, written, base if alias.name == "*" else f"{base}.{alias.name}")
        elif isinstance(node, ast.Call):
            target = _literal_import(node)
            if target is not None:
                yield Import(path, node.lineno, written, target)


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
    layers = set(LAYERS.values())
    assert set(FORBIDDEN) <= layers
    assert all(set(rules) <= layers for rules in FORBIDDEN.values())


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def test_checker_names_file_line_import_and_rule_of_a_lazy_upward_import(tmp_path):
    root = _tree(tmp_path, {
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
    root = _tree(tmp_path, {
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
        ("rpent/mcp/bridge.py", 11, "rclpy", "ros"),
        ("rpent/mcp/bridge.py", 15, "rpent.runner.logs.setup_console", "runner"),
        ("robots/arm/__init__.py", 1, "rclpy.node.Node", "ros"),
        ("rpent_ros/node.py", 1, "rpent.cli.main.build_parser", "cli"),
    }


def test_checker_keeps_rpc_transports_below_the_facades(tmp_path):
    root = _tree(tmp_path, {
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
    root = _tree(tmp_path, {
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
    root = _tree(tmp_path, {
        "rpent/__init__.py": "",
        "rpent/record/__init__.py": "",
        "rpent/record/steps.py": "from rpent.record.values import json_default\nfrom rpent.tools.result import ToolResult\n",
        "rpent/tools/toolkit.py": "from rpent.record.steps import StepLog\n",
    })
    assert [str(v) for v in violations(root)] == [
        "rpent/record/steps.py:2: `from rpent.tools.result import ToolResult` -> record imports core, which is "
        "forbidden: " + FORBIDDEN["record"]["core"]
    ]


# -- one place for the default model -------------------------------------------------------------

SETTINGS = "rpent/settings.py"


def model_literals(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """`file:line` of every `*DEFAULT_MODEL* = "<string>"` outside rpent/settings.py."""
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            rel = str(path.relative_to(root))
            if rel == SETTINGS:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
                value = getattr(node, "value", None)
                if (isinstance(value, ast.Constant) and isinstance(value.value, str)
                        and any(isinstance(t, ast.Name) and "DEFAULT_MODEL" in t.id for t in targets)):
                    found.append(f"{rel}:{node.lineno}: {targets[0].id} = {value.value!r}")
    return found


def test_default_models_are_defined_in_settings_only():
    # A planner, RobotAgent or the dashboard that named its own default would disagree with the rest.
    found = model_literals(ROOT)
    if found:
        pytest.fail(f"default models must come from {SETTINGS}:\n" + "\n".join(found), pytrace=False)


def test_model_check_finds_a_default_model_defined_outside_settings(tmp_path):
    root = _tree(tmp_path, {
        "rpent/settings.py": 'DEFAULT_MODEL = "claude-a"\n',
        "rpent/planner/codex.py": 'from rpent.settings import DEFAULT_MODEL\nCODEX_DEFAULT_MODEL: str = "gpt-b"\n',
    })
    assert model_literals(root) == ["rpent/planner/codex.py:2: CODEX_DEFAULT_MODEL = 'gpt-b'"]


# -- the call lifecycle is one unit ---------------------------------------------------------------

#: The modules of a tool call's life (its state machine, admission, cancel and settlement). Outside
#: rpent.tools a call is reached only through the handle rpent.tools.ToolCall and the ToolkitAPI.
CALL_UNIT = ("rpent.tools.call", "rpent.tools.scheduler", "rpent.tools.lifecycle")
CALL_MODULE = "rpent/tools/call.py"
#: Packages in which no module may import, through any chain, back into itself: all of rpent (the tools'
#: call lifecycle, eval's plot and results), rpent_ros, and of the robots LIBERO (openpi_policy and vla)
#: and the Franka with its rooms (calibration, sim, hardware).
NO_CIRCLES = ("rpent", "rpent_ros", "robots.libero", "robots.franka")


def _module_of(target: str, modules: set[str]) -> str | None:
    """The module of the tree an import names: itself, or the module a name is taken from
    (`rpent.tools.call.ToolCall` -> `rpent.tools.call`); None outside the tree."""
    parent = target.rpartition(".")[0]
    return target if target in modules else parent if parent in modules else None


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (lazy and TYPE_CHECKING imports too)."""
    folder = root / package.replace(".", "/")
    paths = {module_name(root, path): path for path in sorted(folder.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for importer, path in paths.items():
        found = imports_in(path.read_text(encoding="utf-8"), importer, path=str(path.relative_to(root)),
                           is_package=path.name == "__init__.py")
        graph[importer] = {m for imp in found if (m := _module_of(imp.target, set(paths))) not in (None, importer)}
    return graph


def import_circles(root: Path, packages: tuple[str, ...] = NO_CIRCLES) -> list[list[str]]:
    """Each set of modules that import one another in a circle."""
    return [circle for package in packages for circle in circles_of(import_graph(root, package))]


def circles_of(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            members = []
            while not members or members[-1] != module:
                members.append(stack.pop())
            if len(members) > 1:
                circles.append(sorted(members))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def _private_members(root: Path) -> set[str]:
    """ToolCall's private attributes (from its __slots__) and methods."""
    tree = ast.parse((root / CALL_MODULE).read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "ToolCall":
            for item in node.body:
                if isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets):
                    names |= {e.value for e in ast.walk(item.value) if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                elif isinstance(item, ast.FunctionDef):
                    names.add(item.name)
    return {name for name in names if name.startswith("_") and not name.endswith("__")}


def call_unit_breaches(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """Where code outside the unit reaches into it: imports of its modules from outside rpent.tools, of
    its private names from anywhere, and a ToolCall's private attributes touched outside call.py."""
    private = _private_members(root)
    found: list[tuple[str, int, str]] = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            importer = module_name(root, path)
            rel = str(path.relative_to(root))
            source = path.read_text(encoding="utf-8")
            for imp in imports_in(source, importer, path=rel, is_package=path.name == "__init__.py"):
                unit = next((m for m in CALL_UNIT if imp.target == m or imp.target.startswith(m + ".")), None)
                if unit is None or unit == importer:
                    continue
                if not (importer == "rpent.tools" or importer.startswith("rpent.tools.")):
                    found.append((rel, imp.line, f"`{imp.source}`: only rpent.tools imports {unit}; "
                                  "elsewhere use rpent.tools.ToolCall and rpent.tools.api.ToolkitAPI"))
                elif imp.target.rpartition(".")[2].startswith("_"):
                    found.append((rel, imp.line, f"`{imp.source}`: a private name of {unit}; "
                                  "the unit's API is its public names"))
            if rel == CALL_MODULE:
                continue
            lines = source.splitlines()
            for node in ast.walk(ast.parse(source, filename=rel)):
                if (isinstance(node, ast.Attribute) and node.attr in private
                        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                    found.append((rel, node.lineno, f"`{lines[node.lineno - 1].strip()}`: {node.attr} is "
                                  "ToolCall's own; use its public methods (admit, cancel, settle, ...)"))
    return [f"{rel}:{line}: {text}" for rel, line, text in sorted(found)]


def test_no_import_circle_in_the_tools_package():
    found = import_circles(ROOT)
    if found:
        pytest.fail("modules that import one another in a circle:\n" + "\n".join(" -> ".join(c) for c in found),
                    pytrace=False)


def test_nothing_reaches_into_the_call_lifecycle():
    found = call_unit_breaches(ROOT)
    if found:
        pytest.fail("the call lifecycle is reached into:\n" + "\n".join(found), pytrace=False)


_UNIT = {
    "rpent/__init__.py": "",
    "rpent/tools/__init__.py": "from rpent.tools.call import ToolCall\n",
    "rpent/tools/call.py": """\
        class ToolCall:
            __slots__ = ("_gate", "stage")

            def admit(self):
                self._gate = None
        """,
    "rpent/tools/scheduler.py": "from rpent.tools.call import ToolCall\n",
    "rpent/tools/toolkit.py": "from rpent.tools.scheduler import CallScheduler\n",
    "rpent_ros/__init__.py": "",
    "rpent_ros/goals.py": "from rpent.tools import ToolCall\n",
}


def test_call_unit_rules_hold_on_a_unit_that_keeps_them(tmp_path):
    root = _tree(tmp_path, _UNIT)
    assert import_circles(root) == []
    assert call_unit_breaches(root) == []


def test_circle_rule_fails_on_a_planted_import_back(tmp_path):
    # call.py naming the Toolkit, if only for an annotation, closes call -> toolkit -> scheduler -> call.
    planted = "from rpent.tools.toolkit import Toolkit\n" + textwrap.dedent(_UNIT["rpent/tools/call.py"])
    root = _tree(tmp_path, {**_UNIT, "rpent/tools/call.py": planted})
    assert import_circles(root) == [["rpent.tools.call", "rpent.tools.scheduler", "rpent.tools.toolkit"]]


@pytest.mark.parametrize(("module", "back", "other", "forth"), [
    ("rpent/eval/plot.py", "from rpent.eval.results import _label",
     "rpent/eval/results.py", "from rpent.eval.plot import plot_success"),
    ("robots/libero/openpi_policy.py", "from robots.libero.vla import PolicyInputError",
     "robots/libero/vla.py", "from robots.libero.openpi_policy import OpenpiLiberoPolicy"),
])
def test_circle_rule_fails_on_the_circles_issue_25_broke_if_planted_again(tmp_path, module, back, other, forth):
    package = module.rpartition("/")[0]
    files = {f"{package.partition('/')[0]}/__init__.py": "", f"{package}/__init__.py": "", other: forth + "\n",
             module: ""}
    assert import_circles(_tree(tmp_path / "kept", files)) == []
    planted = _tree(tmp_path / "planted", {**files, module: back + "\n"})
    assert import_circles(planted) == [sorted(p.removesuffix(".py").replace("/", ".") for p in (module, other))]


# -- the Franka's rooms -----------------------------------------------------------------------------

#: robots/franka's sub-packages that calibration is built on: `rpent calibrate` runs on the simulator
#: and the devices, so they never import it back (the simulator takes the calibration board as a
#: robots.franka.sim.world.WorldPart, not as a ChArUco board).
#: Named as folders: until issue 25's move the bare dotted names were the modules sim.py and
#: calibration.py, and the move's rewriting, re-run after a merge, reads them so.
BELOW_CALIBRATION = tuple(room.replace("/", ".") for room in ("robots/franka/sim", "robots/franka/hardware"))
CALIBRATION = "robots/franka/calibration".replace("/", ".")


def franka_room_breaches(root: Path) -> list[str]:
    graph = import_graph(root, "robots.franka")
    return sorted(f"{module} imports {target}" for module, targets in graph.items()
                  if any(module == room or module.startswith(room + ".") for room in BELOW_CALIBRATION)
                  for target in targets if target == CALIBRATION or target.startswith(CALIBRATION + "."))


def test_franka_simulator_and_hardware_import_nothing_of_calibration():
    found = franka_room_breaches(ROOT)
    if found:
        pytest.fail("robots/franka's rooms point back up to calibration:\n" + "\n".join(found), pytrace=False)


def test_franka_room_rule_fails_on_a_planted_import_of_calibration(tmp_path):
    files = {"robots/__init__.py": "", "robots/franka/__init__.py": "", "robots/franka/sim/__init__.py": "",
             "robots/franka/calibration/__init__.py": "",
             "robots/franka/calibration/charuco.py": "",
             "robots/franka/calibration/cli.py": "from robots.franka.sim.world import build_world\n",
             "robots/franka/sim/world.py": ""}
    assert franka_room_breaches(_tree(tmp_path / "kept", files)) == []
    planted = {**files, "robots/franka/sim/world.py": "from robots.franka.calibration.charuco import BoardSpec\n"}
    assert franka_room_breaches(_tree(tmp_path / "planted", planted)) == [
        "robots.franka.sim.world imports robots.franka.calibration.charuco"]


def test_call_unit_rule_fails_on_planted_reaches(tmp_path):
    root = _tree(tmp_path, {
        **_UNIT,
        "rpent_ros/goals.py": "from rpent.tools.scheduler import CallScheduler\n",
        "rpent/tools/toolkit.py": """\
            from rpent.tools.call import _latch


            def drop(call):
                call._gate.release()
            """,
    })
    assert call_unit_breaches(root) == [
        "rpent/tools/toolkit.py:1: `from rpent.tools.call import _latch`: a private name of rpent.tools.call; "
        "the unit's API is its public names",
        "rpent/tools/toolkit.py:5: `call._gate.release()`: _gate is ToolCall's own; use its public methods "
        "(admit, cancel, settle, ...)",
        "rpent_ros/goals.py:1: `from rpent.tools.scheduler import CallScheduler`: only rpent.tools imports "
        "rpent.tools.scheduler; elsewhere use rpent.tools.ToolCall and rpent.tools.api.ToolkitAPI",
    ]


# -- callers type against the ToolkitAPI ---------------------------------------------------------

#: The toolkit's callers: they get a Toolkit in process and a RosToolkit or RemoteTask over ROS, so they
#: name the protocol (rpent.tools.api.ToolkitAPI), never the in-process class.
TOOLKIT_CALLERS = ("rpent.planner", "rpent.mcp", "rpent.runner", "rpent.dashboard")
IN_PROCESS_TOOLKIT = ("rpent.tools.toolkit", "rpent.tools.Toolkit")


def toolkit_class_imports(root: Path, callers: tuple[str, ...] = TOOLKIT_CALLERS) -> list[str]:
    """Each import of the in-process Toolkit (module level or lazy) in a module of `callers`."""
    found = []
    for package in callers:
        base = root / package.replace(".", "/")
        for path in sorted(base.rglob("*.py")) if base.is_dir() else []:
            rel = str(path.relative_to(root))
            importer = module_name(root, path)
            for imp in imports_in(path.read_text(encoding="utf-8"), importer, path=rel,
                                  is_package=path.name == "__init__.py"):
                if any(imp.target == t or imp.target.startswith(t + ".") for t in IN_PROCESS_TOOLKIT):
                    found.append(f"{imp.path}:{imp.line}: `{imp.source}`: {package} gets a Toolkit in process and "
                                 "a RosToolkit over ROS; type against rpent.tools.api.ToolkitAPI")
    return found


def test_planners_mcp_runner_and_dashboard_type_against_the_toolkit_api():
    found = toolkit_class_imports(ROOT)
    if found:
        pytest.fail("callers that name the in-process Toolkit:\n" + "\n".join(found), pytrace=False)


@pytest.mark.parametrize("planted", [
    "from rpent.tools.toolkit import Toolkit\n",
    "from rpent.tools import ToolResult, Toolkit\n",
    "import rpent.tools.toolkit\n",
    "def run(toolkit):\n    from rpent.tools.toolkit import Toolkit\n    return isinstance(toolkit, Toolkit)\n",
])
def test_toolkit_api_rule_fails_on_a_planted_toolkit_import(tmp_path, planted):
    files = {"rpent/__init__.py": "", "rpent/planner/__init__.py": "",
             "rpent/planner/base.py": "from rpent.tools.api import ToolkitAPI\nfrom rpent.tools import ToolResult\n"}
    assert toolkit_class_imports(_tree(tmp_path / "kept", files)) == []
    root = _tree(tmp_path / "planted", {**files, "rpent/planner/replay.py": planted})
    line = next(n for n, text in enumerate(planted.splitlines(), 1) if "import" in text)
    assert toolkit_class_imports(root) == [
        f"rpent/planner/replay.py:{line}: `{planted.splitlines()[line - 1].strip()}`: rpent.planner gets a Toolkit "
        "in process and a RosToolkit over ROS; type against rpent.tools.api.ToolkitAPI"]
