"""Structure rules beside the layering (test_architecture.py): one place for the default model, the call
lifecycle as one unit, no import circles, rooms that import only the rooms below them (robots/franka's,
rpent_ros's), and callers typed against the ToolkitAPI. Each rule has a self-test that plants a breach
in a small tree and sees it named.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from import_reading import PACKAGES, ROOT, imports_in, module_name, write_tree

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
    root = write_tree(tmp_path, {
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
    root = write_tree(tmp_path, _UNIT)
    assert import_circles(root) == []
    assert call_unit_breaches(root) == []


def test_circle_rule_fails_on_a_planted_import_back(tmp_path):
    # call.py naming the Toolkit, if only for an annotation, closes call -> toolkit -> scheduler -> call.
    planted = "from rpent.tools.toolkit import Toolkit\n" + textwrap.dedent(_UNIT["rpent/tools/call.py"])
    root = write_tree(tmp_path, {**_UNIT, "rpent/tools/call.py": planted})
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
    assert import_circles(write_tree(tmp_path / "kept", files)) == []
    planted = write_tree(tmp_path / "planted", {**files, module: back + "\n"})
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
    assert franka_room_breaches(write_tree(tmp_path / "kept", files)) == []
    planted = {**files, "robots/franka/sim/world.py": "from robots.franka.calibration.charuco import BoardSpec\n"}
    assert franka_room_breaches(write_tree(tmp_path / "planted", planted)) == [
        "robots.franka.sim.world imports robots.franka.calibration.charuco"]


# -- rpent_ros's rooms ------------------------------------------------------------------------------

#: rpent_ros's three sides, from the top floor down. The operator side (dashboard, MCP bridge, planner
#: nodes) drives a toolkit_node through RosToolkit; the toolkit node assembles its runtime from runtime
#: nodes; the runtime side serves runtime objects and knows neither who calls them nor who watches. A
#: side may import the sides below it; rpent_ros's own modules outside the rooms (entry, node_main,
#: params, spinning, launch_helpers, security/, ...) are the plumbing all three share and import none.
ROS_ROOMS = ("rpent_ros.operator", "rpent_ros.toolkit", "rpent_ros.runtime")


def _ros_room(module: str) -> int:
    """The floor of a module of rpent_ros: its room's place in ROS_ROOMS, len(ROS_ROOMS) for the shared plumbing."""
    return next((i for i, room in enumerate(ROS_ROOMS) if module == room or module.startswith(room + ".")),
                len(ROS_ROOMS))


def ros_room_breaches(root: Path) -> list[str]:
    """Each import (module level or lazy) in rpent_ros of a room above the importer's own floor."""
    found = []
    for path in sorted((root / "rpent_ros").rglob("*.py")):
        rel = str(path.relative_to(root))
        importer = module_name(root, path)
        floor = _ros_room(importer)
        for imp in imports_in(path.read_text(encoding="utf-8"), importer, path=rel,
                              is_package=path.name == "__init__.py"):
            if not imp.target.startswith("rpent_ros."):
                continue
            target = _ros_room(imp.target)
            if target < floor:
                side = "the shared plumbing" if floor == len(ROS_ROOMS) else ROS_ROOMS[floor]
                found.append(f"{imp.path}:{imp.line}: `{imp.source}`: {side} imports no room above it "
                             f"({ROS_ROOMS[target]}; the order is {' > '.join(ROS_ROOMS)} > the shared plumbing)")
    return found


def test_rpent_ros_rooms_import_only_the_rooms_below_them():
    found = ros_room_breaches(ROOT)
    if found:
        pytest.fail("rpent_ros's rooms point back up:\n" + "\n".join(found), pytrace=False)


_ROS_ROOMS_TREE = {
    "rpent_ros/__init__.py": "", "rpent_ros/params.py": "",
    "rpent_ros/operator/__init__.py": "",
    "rpent_ros/operator/dashboard_node.py": "from rpent_ros.toolkit.client import RosToolkit\n"
                                            "from rpent_ros.runtime.image_msgs import image_msg_to_rgb\n",
    "rpent_ros/toolkit/__init__.py": "",
    "rpent_ros/toolkit/client.py": "from rpent_ros.params import Param\n",
    "rpent_ros/toolkit/toolkit_node.py": "from rpent_ros.toolkit.client import RosToolkit\n"
                                         "def runtime():\n    from rpent_ros.runtime.remote import build\n",
    "rpent_ros/runtime/__init__.py": "",
    "rpent_ros/runtime/image_msgs.py": "",
    "rpent_ros/runtime/remote.py": "from rpent_ros.params import Param\nfrom rpent_ros.runtime import image_msgs\n",
}


@pytest.mark.parametrize(("module", "line", "room"), [
    ("rpent_ros/runtime/remote.py", "from rpent_ros.toolkit.client import RosToolkit", "rpent_ros.toolkit"),
    ("rpent_ros/runtime/image_msgs.py", "from rpent_ros.operator import dashboard_node", "rpent_ros.operator"),
    ("rpent_ros/toolkit/client.py", "def approve():\n    from rpent_ros.operator.dashboard_node import serve",
     "rpent_ros.operator"),
    ("rpent_ros/params.py", "from rpent_ros.toolkit.client import RosToolkit", "rpent_ros.toolkit"),
])
def test_ros_room_rule_fails_on_a_planted_import_back_up(tmp_path, module, line, room):
    assert ros_room_breaches(write_tree(tmp_path / "kept", _ROS_ROOMS_TREE)) == []
    planted = write_tree(tmp_path / "planted", {**_ROS_ROOMS_TREE, module: line + "\n"})
    found = ros_room_breaches(planted)
    assert len(found) == 1 and found[0].startswith(f"{module}:{line.count(chr(10)) + 1}: `")
    assert f"imports no room above it ({room};" in found[0]


def test_call_unit_rule_fails_on_planted_reaches(tmp_path):
    root = write_tree(tmp_path, {
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
    assert toolkit_class_imports(write_tree(tmp_path / "kept", files)) == []
    root = write_tree(tmp_path / "planted", {**files, "rpent/planner/replay.py": planted})
    line = next(n for n, text in enumerate(planted.splitlines(), 1) if "import" in text)
    assert toolkit_class_imports(root) == [
        f"rpent/planner/replay.py:{line}: `{planted.splitlines()[line - 1].strip()}`: rpent.planner gets a Toolkit "
        "in process and a RosToolkit over ROS; type against rpent.tools.api.ToolkitAPI"]
