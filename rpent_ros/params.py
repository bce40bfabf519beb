"""ROS parameters -> the same validated RunConfig `rpent run` builds from flags (no rclpy here).

A robot's CLI flags are its parameters: `--task-id 3` is the parameter `task_id: 3`. Parsing goes
through the robot's own argparse definitions and `parse_config`, so the rules and error messages
are the ones the CLI gives.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from rpent.robot import ConfigError, RobotSpec

# Parameters of the node itself (ours, and those every rclpy node has); they are not robot flags.
NODE_PARAMETERS = (
    "robot", "runtime_mode", "cameras_node", "publish_rate_hz", "camera_rate_hz", "use_sim_time", "start_type_description_service",
    "action_clips", "toolkit_namespace", "frame_topics", "approval_service",
)


def run_parser(spec: RobotSpec) -> argparse.ArgumentParser:
    from rpent.cli.main import build_parser

    parser = build_parser(spec)
    run = next(
        action for action in parser._subparsers._group_actions  # type: ignore[union-attr]
        if isinstance(action, argparse._SubParsersAction)
    ).choices["run"]
    return run


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
