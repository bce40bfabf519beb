"""ROS parameters: declared with a description, a type and a rule, and checked when the node starts.

`NodeParameters` declares a node's own parameters (`Param`: what it is, its type, its range or
choices), read-only because nodes read them once; `ros2 param describe /arm_left publish_rate_hz`
then says what each one is. A value that breaks a rule, or a name the node does not take, stops
the node at start with the parameter's name and the rule.

A robot's CLI flags are parameters of the nodes that host it: `--task-id 3` is `task_id: 3`
(`declare_robot_parameters`). They are declared from the robot's own flag definitions and parsed
with them and `parse_config`, so the rules and messages are the ones `rpent run` gives.

rclpy and rcl_interfaces are imported where a node is at hand: the conversions here also serve
tests that run without ROS 2.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rpent.robot import ConfigError, RobotSpec

# Parameters of the node itself (ours, and those every rclpy node has); they are not robot flags.
NODE_PARAMETERS = (
    "robot", "runtime_mode", "cameras_node", "publish_rate_hz", "camera_rate_hz", "use_sim_time", "start_type_description_service",
    "action_clips", "toolkit_namespace", "frame_topics", "approval_service",
)
# Declared by rclpy itself for every node.
RCLPY_PARAMETERS = ("use_sim_time", "start_type_description_service")
KINDS = ("bool", "int", "float", "str", "str[]", "float[]")


@dataclass(frozen=True)
class Param:
    """One parameter: name, default, what it is for, its type (`KINDS`, from the default when
    omitted) and its rule (`low`..`high` inclusive, or one of `choices`). A default of None
    declares the parameter without a value ("not set")."""

    name: str
    default: Any
    description: str
    kind: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[Any, ...] = ()
    numbers_as_text: bool = False  # `-p device:=0` arrives as an integer; the node wants "0"
    length: int | None = None  # lists of exactly this many items
    # The rule in words when the flag's own type checks it (e.g. --planner: a name or a plugin path).
    rule_text: str = ""

    def __post_init__(self) -> None:
        if not self.kind:
            object.__setattr__(self, "kind", _kind_of(self.name, self.default))
        if self.kind not in KINDS:
            raise ValueError(f"parameter {self.name}: kind must be one of {KINDS}, got {self.kind!r}")

    def rule(self) -> str:
        noun = {"bool": "true or false", "int": "an integer", "float": "a number", "str": "text",
                "str[]": "a list of text", "float[]": "a list of numbers"}[self.kind]
        if self.length is not None:
            noun = f"a list of {self.length} numbers" if self.kind == "float[]" else f"a list of {self.length} texts"
        if self.rule_text:
            return self.rule_text
        if self.choices:
            return "one of " + ", ".join(str(c) for c in self.choices)
        if self.low is not None and self.high is not None:
            return f"{noun} from {_num(self.low)} to {_num(self.high)}"
        if self.low is not None:
            return f"{noun} >= {_num(self.low)}"
        if self.high is not None:
            return f"{noun} <= {_num(self.high)}"
        return noun

    def check(self, value: Any) -> Any:
        """The value in this parameter's type, or ConfigError naming the parameter and its rule."""
        if value is None:
            return None
        converted = _convert_kind(self, value)
        if converted is _INVALID:
            raise ConfigError(f"parameter {self.name}: must be {self.rule()}, got {value!r}")
        items = converted if isinstance(converted, list) else [converted]
        if self.length is not None and len(items) != self.length:
            raise ConfigError(f"parameter {self.name}: must be {self.rule()}, got {value!r}")
        if self.choices and converted not in self.choices:
            raise ConfigError(f"parameter {self.name}: must be {self.rule()}, got {value!r}")
        numbers = items if self.kind in ("int", "float", "float[]") else []
        if any((self.low is not None and v < self.low) or (self.high is not None and v > self.high) for v in numbers):
            raise ConfigError(f"parameter {self.name}: must be {self.rule()}, got {value!r}")
        return converted


_INVALID = object()


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _kind_of(name: str, default: Any) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, str):
        return "str"
    if isinstance(default, (list, tuple)) and default and all(isinstance(v, str) for v in default):
        return "str[]"
    if isinstance(default, (list, tuple)) and default and all(isinstance(v, (int, float)) for v in default):
        return "float[]"
    raise ValueError(f"parameter {name}: give its kind (the default {default!r} does not tell)")


def _convert_kind(param: Param, value: Any) -> Any:
    kind = param.kind
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return value if isinstance(value, bool) else _INVALID
    if kind == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) else _INVALID
    if kind == "float":
        return float(value) if number and math.isfinite(value) else _INVALID
    if kind == "str":
        if isinstance(value, str):
            return value
        return str(value) if param.numbers_as_text and number else _INVALID
    if not isinstance(value, (list, tuple)):
        return _INVALID
    if kind == "str[]":
        return list(value) if all(isinstance(v, str) for v in value) else _INVALID
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
    return [float(v) for v in value] if ok else _INVALID


class NodeParameters:
    """Declares a node's parameters with descriptors and checks the values it was given.

    The node must be created with `automatically_declare_parameters_from_overrides=True`, only so
    that the values it was given (`-p`, a params file, a launch file) can be read here through the
    public API: each is taken back and declared again with its descriptor (read-only: nodes read
    their parameters once). `finish()` refuses any given name the node has not declared.
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        self.given: dict[str, Any] = {}
        for name, parameter in node.get_parameters_by_prefix("").items():
            if name in RCLPY_PARAMETERS or name.startswith("qos_overrides."):
                continue
            self.given[name] = parameter.value
            node.undeclare_parameter(name)
        self.declared: list[str] = []

    def declare(self, *params: Param) -> dict[str, Any]:
        """Declare `params`; returns name -> value (given, else default), checked against each rule."""
        from rclpy.parameter import Parameter

        values: dict[str, Any] = {}
        for param in params:
            value = param.check(self.given.get(param.name, param.default))
            descriptor = _descriptor(param)
            if value is None or value == []:  # declared with its type and no value (rclpy cannot type an empty list)
                self.node.declare_parameter(param.name, _ROS_TYPES[param.kind](Parameter.Type), descriptor, ignore_override=True)
            else:
                self.node.declare_parameter(param.name, value, descriptor, ignore_override=True)
            self.declared.append(param.name)
            values[param.name] = value
        return values

    def finish(self) -> None:
        unknown = sorted(set(self.given) - set(self.declared))
        if unknown:
            raise ConfigError(f"parameter {unknown[0]}: not a parameter of node {self.node.get_name()} "
                              f"(it takes: {', '.join(sorted(self.declared))})")


_ROS_TYPES = {
    "bool": lambda t: t.BOOL, "int": lambda t: t.INTEGER, "float": lambda t: t.DOUBLE, "str": lambda t: t.STRING,
    "str[]": lambda t: t.STRING_ARRAY, "float[]": lambda t: t.DOUBLE_ARRAY,
}


def _descriptor(param: Param) -> Any:
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
    from rclpy.parameter import Parameter

    descriptor = ParameterDescriptor(description=param.description, read_only=True,
                                     additional_constraints=f"must be {param.rule()}")
    descriptor.type = _ROS_TYPES[param.kind](Parameter.Type).value
    if param.kind in ("float", "float[]") and (param.low is not None or param.high is not None) and not param.choices:
        low = -math.inf if param.low is None else float(param.low)
        high = math.inf if param.high is None else float(param.high)
        descriptor.floating_point_range = [FloatingPointRange(from_value=low, to_value=high, step=0.0)]
    if param.kind == "int" and param.low is not None and param.high is not None and not param.choices:
        descriptor.integer_range = [IntegerRange(from_value=int(param.low), to_value=int(param.high), step=1)]
    return descriptor


# --- a robot's flags as parameters ------------------------------------------------------------------
ROBOT_PARAM = Param("robot", "toy", "robot package robots.<name> whose tools, prompts and flags this node uses "
                    "(see `rpent robots`)")


@dataclass
class RobotParameters:
    """What `declare_robot_parameters` found: the node's own values, the robot and its flags."""

    values: dict[str, Any]
    robot: Any  # the robot module (get_robot_spec, get_toolkit)
    spec: RobotSpec
    namespace: argparse.Namespace  # the flags, as `rpent run --robot <robot>` would have parsed them
    flags: dict[str, Any] = field(default_factory=dict)


def declare_robot_parameters(node: Any, own: Sequence[Param], *, flag_defaults: Mapping[str, Any] | None = None,
                             skip_flags: Sequence[str] = ()) -> RobotParameters:
    """Declare `robot`, the node's own parameters, then every `rpent run` flag of that robot.

    `flag_defaults` replaces a flag's default for this node; `skip_flags` are flags it does not take.
    Raises ConfigError naming the parameter for a bad value or an unknown name.
    """
    from rpent.robot import load_robot
    from rpent.robot.discovery import RobotNotFound

    params = NodeParameters(node)
    values = params.declare(ROBOT_PARAM, *own)
    try:
        robot = load_robot(values["robot"])
    except RobotNotFound as exc:
        raise ConfigError(f"parameter robot: {exc}") from None
    spec = robot.get_robot_spec()
    taken = {p.name for p in own} | {"robot", *skip_flags}
    flags = params.declare(*(p for p in robot_flag_params(spec, flag_defaults or {}) if p.name not in taken))
    params.finish()
    namespace = namespace_from_params(spec, {k: v for k, v in flags.items() if v is not None})
    return RobotParameters(values, robot, spec, namespace, flags)


def robot_flag_params(spec: RobotSpec, defaults: Mapping[str, Any]) -> list[Param]:
    """A Param per `rpent run --robot <spec>` flag: its type, default, help and choices."""
    params = []
    for action in run_parser(spec)._actions:
        if action.dest in ("help", "robot") or not action.option_strings:
            continue
        flag = max(action.option_strings, key=len)
        default = defaults.get(action.dest, action.default)
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            kind = "bool"
        elif action.type in (int, float):
            kind = action.type.__name__
        elif isinstance(default, (int, float)) and not isinstance(default, bool):
            kind = type(default).__name__
        else:
            kind = "str"
            default = "" if default is None else str(default)
        help_text = (action.help or "").replace("%(default)s", str(action.default))
        choices = tuple(action.choices) if action.choices is not None else ()
        params.append(Param(action.dest, default, f"{help_text} (`rpent run {flag}`)", kind=kind, choices=choices,
                            rule_text=getattr(action.type, "rule", "")))
    return params


def parse_robot_config(spec: RobotSpec, namespace: argparse.Namespace) -> Any:
    """spec.parse_config, with its refusals worded for parameters (`--sim-seed: ...` -> `parameter sim_seed: ...`)."""
    with flag_errors_as_parameters():
        return spec.parse_config(namespace)


@contextmanager
def flag_errors_as_parameters() -> Iterator[None]:
    """ConfigErrors that name a CLI flag (`--recipe: cannot read x`) name the parameter instead."""
    try:
        yield
    except ConfigError as exc:
        message = re.sub(r"^--([a-z0-9][a-z0-9-]*)", lambda m: "parameter " + m.group(1).replace("-", "_"), str(exc))
        raise ConfigError(message) from None


def package_file(path: str) -> str:
    """`path` as given when it exists from here (or is absolute); else the same relative path inside
    this package's installed files (its share directory, then beside the installed `robots` package),
    so `recipe:=robots/franka/recipes/pick_cube.jsonl` works from any folder. Unchanged if none has it."""
    if not path or Path(path).is_absolute() or Path(path).exists():
        return path
    for root in _package_roots():
        candidate = root / path
        if candidate.exists():
            return str(candidate)
    return path


def _package_roots() -> list[Path]:
    roots = []
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        try:
            roots.append(Path(get_package_share_directory("rpent")))
        except PackageNotFoundError:
            pass
    except ImportError:  # no ROS 2 sourced
        pass
    # Found by name, not imported: rpent_ros imports no robot package (test_architecture).
    robots = importlib.util.find_spec("robots")
    for folder in (robots.submodule_search_locations or []) if robots is not None else []:
        roots.append(Path(folder).resolve().parent)
    return roots


def run_parser(spec: RobotSpec) -> argparse.ArgumentParser:
    """The options of `rpent run --robot <spec>`, from the runner that defines them for the cli too."""
    from rpent.runner.options import run_option_parser

    return run_option_parser(spec)


def namespace_from_params(spec: RobotSpec, params: Mapping[str, Any]) -> argparse.Namespace:
    """Defaults of `rpent run --robot <spec>` overridden by parameters; unknown names are refused."""
    parser = run_parser(spec)
    namespace = parser.parse_args(["--robot", spec.name])
    known = {action.dest: action for action in parser._actions}
    for name, value in params.items():
        if name in NODE_PARAMETERS or name.startswith("qos_overrides."):
            continue
        dest = name.replace("-", "_").replace(".", "_")
        action = known.get(dest)
        if action is None or dest in ("help", "robot"):
            raise ConfigError(f"parameter {name}: not a flag of robot '{spec.name}' (see `rpent run --robot {spec.name} --help`)")
        if value is None or value == "":
            continue
        setattr(namespace, dest, _convert(action, name, value))
    return namespace


def _convert(action: argparse.Action, name: str, value: Any) -> Any:
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise ConfigError(f"parameter {name}: must be true or false, got {value!r}")
        return value
    convert = action.type or (lambda v: v)
    try:
        converted = convert(value)
    except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
        raise ConfigError(f"parameter {name}: {exc}") from None
    if action.choices is not None and converted not in action.choices:
        raise ConfigError(f"parameter {name}: must be one of {list(action.choices)}, got {value!r}")
    return converted


def frame_topics(channels: list[str], entries: list[str], toolkit_namespace: str, cameras_node: str) -> dict[str, str]:
    """Topic per frame channel: `channel=topic` entries first, then `/<cameras_node>/<channel>/image_raw`,
    else the toolkit node's observation images in channel order."""
    topics: dict[str, str] = {}
    for entry in entries:
        name, sep, topic = entry.partition("=")
        if not sep or not name or not topic:
            raise ConfigError(f"parameter frame_topics: entries must look like 'channel=/topic', got {entry!r}")
        if name not in channels:
            raise ConfigError(f"parameter frame_topics: unknown frame channel {name!r} (channels: {', '.join(channels)})")
        topics[name] = topic
    for index, name in enumerate(channels):
        if name not in topics:
            topics[name] = (f"/{cameras_node.strip('/')}/{name}/image_raw" if cameras_node
                            else f"{toolkit_namespace.rstrip('/')}/observation/image_{index}")
    return topics
