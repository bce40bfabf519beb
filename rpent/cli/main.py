"""The `rpent` command: run a task, list robots and tools, serve a toolkit over MCP."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from typing import NoReturn

from rpent.cli.tool_listing import tool_listing
from rpent.record.segments import RecordError
from rpent.robot import ConfigError, RobotNotFound, RobotSpec, list_robots, load_robot
from rpent.robot.discovery import robot_named_in
from rpent.rule_words import argparse_value_rule
from rpent.runner.logs import setup_console
from rpent.runner.options import add_run_options

log = logging.getLogger("rpent.cli")

DESCRIPTION = """\
RPent: let a language model operate a robot through typed, safe, cancellable tools.

  rpent robots                          list installed robots
  rpent tools --robot toy               list the tools: parameters, ranges, defaults (--schema: JSON schemas)
  rpent run --robot toy --planner replay --recipe robots/toy/recipes/red_block_in_bin.jsonl
  rpent run --robot NAME --help         the robot's own flags
  rpent serve-mcp --robot toy [--http --port 8765]   serve a robot's tools over MCP
  rpent stop --robot franka --reason "..."   latch the stop of every run of a robot (--release: the operator's)
  rpent calibrate --robot franka --sim --camera front --auto 12 --write   hand-eye calibration of a camera
  rpent eval --robot toy --recipe robots/toy/recipes/red_block_in_bin.jsonl --repeats 4 --out runs/eval   a sweep on Ray
  rpent export lerobot runs/franka-* --out datasets/picks [--only-solved] [--convention droid]   a LeRobotDataset v3.0
  rpent ros-security init DIR           an SROS2 keystore for the ROS 2 nodes (ROS 2 sourced; docs/ros.md)
"""


class RpentParser(argparse.ArgumentParser):
    """argparse, but a bad value of a known flag is one line in the house's words
    (`rpent run: error: --sim-seed: must be a whole number, got 'abc'`), not the usage block first.
    An unknown or missing flag still shows the usage: there it is the help. Subcommands inherit it."""

    def error(self, message: str) -> NoReturn:
        rule = argparse_value_rule(message)
        if rule is None:
            super().error(message)
        self.exit(2, f"{self.prog}: error: {rule}\n")


def build_parser(robot_spec=None) -> argparse.ArgumentParser:
    parser = RpentParser(prog="rpent", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run one task with a planner", description="Run one task: start the robot's runtime, "
                              "plan with the chosen planner until its finish tool is accepted, and save the run's record "
                              "(run.log, steps.jsonl, images/, transcript.json, episode.mp4, result.json, recipe_<tag>.jsonl).")
    add_run_options(run, robot_spec)

    commands.add_parser("robots", help="list installed robots", description="List the robots found as robots.<name> packages "
                        "or through the rpent.robots entry-point group.")

    tools = commands.add_parser("tools", help="list a robot's tools: parameters, ranges, defaults (starts no hardware)",
                                description="List each tool with its parameters (type, range, default, description) "
                                "without starting hardware; the ranges are the robot's configured limits (e.g. "
                                "franka's safety envelope, from its --config/--safety-file). --schema, --compact and "
                                "--json print the JSON input schemas a model reads.")
    tools.add_argument("--robot", required=True, help="robot name")
    tools.add_argument("--json", dest="json_out", action="store_true", help="print one JSON list instead of text")
    layout = tools.add_mutually_exclusive_group()
    layout.add_argument("--list", dest="layout", action="store_const", const="list",
                        help="a short listing for people (default when printing to a terminal)")
    layout.add_argument("--schema", "--pretty", dest="layout", action="store_const", const="pretty",
                        help="each tool's full JSON input schema, indented")
    layout.add_argument("--compact", dest="layout", action="store_const", const="compact",
                        help="each JSON schema on one line (default when piped)")
    if robot_spec is not None:
        robot_spec.add_cli_args(tools)  # e.g. franka's --config / --safety-file: the limits its ranges come from

    calibrate = commands.add_parser(
        "calibrate", help="hand-eye calibration of a robot's camera (--robot NAME --help for its flags)",
        description="Calibrate where a camera sits: the robot moves through poses (checked like any tool motion), "
        "sees a calibration board, and solves for the camera's pose; --write stores it in the robot's config.",
    )
    calibrate.add_argument("--robot", required=True, help="robot name")
    if robot_spec is not None:
        robot_spec.add_calibrate_args(calibrate)

    from rpent.cli.serve_mcp import add_serve_mcp_parser  # the parser only; the MCP SDK loads when serving

    add_serve_mcp_parser(commands, robot_spec)
    from rpent.cli.stop import add_stop_parser

    add_stop_parser(commands)
    from rpent.eval.command import add_eval_parser  # the flags only; Ray loads when a sweep runs

    add_eval_parser(commands)
    from rpent.dataset.command import add_export_parser  # the flags only; pyarrow and PyAV load to export

    add_export_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["ros-security"]:
        return _ros_security(argv[1:])
    spec = None
    module = None
    robot_name = robot_named_in(argv)
    if argv[:1] in (["run"], ["serve-mcp"], ["calibrate"], ["tools"]) and robot_name:
        try:
            module = load_robot(robot_name)
            spec = module.get_robot_spec()
        except RobotNotFound as exc:
            print(f"rpent: error: {exc}", file=sys.stderr)
            return 2
    parser = build_parser(spec)
    args = _parse(parser, argv)

    if args.command == "robots":
        for name in list_robots():
            print(name)
        return 0
    if args.command == "tools":
        return _print_tools(args, spec)

    if args.command == "serve-mcp":
        from rpent.cli.serve_mcp import serve_mcp

        return serve_mcp(args)

    if args.command == "stop":
        from rpent.cli.stop import stop_command

        return stop_command(args)

    if args.command == "export":
        from rpent.dataset.command import export_command

        setup_console(quiet=False, json_logs=False)
        return export_command(args)

    if args.command == "eval":
        from rpent.eval.command import eval_command

        setup_console(quiet=False, json_logs=False)
        return eval_command(args)

    if args.command == "calibrate":
        assert spec is not None
        setup_console(quiet=False, json_logs=False)
        try:
            return spec.calibrate(args)
        except ConfigError as exc:
            print(f"rpent: error: {exc}", file=sys.stderr)
            return 2

    setup_console(quiet=args.quiet, json_logs=args.json_logs)
    assert module is not None and spec is not None
    from rpent.runner.run import EXIT_CONFIG, default_output_dir, in_flag_terms, run

    args.started = time.time()  # the one timestamp of this run: folder name, run id, inbox copy
    if args.output_dir is None:
        args.output_dir = str(default_output_dir(spec.name, args.started))
    try:
        if args.dashboard:
            from rpent.dashboard.cli import serve_dashboard

            return serve_dashboard(args, spec, module)
        return run(args, spec, module)
    except (ConfigError, RecordError) as exc:
        print(f"rpent: error: {in_flag_terms(str(exc))}", file=sys.stderr)
        return EXIT_CONFIG


def _ros_security(argv: list[str]) -> int:
    """`rpent ros-security ...` is the ROS side's (rpent_ros.security, on sros2): run it by name, as robots are
    found by name, so this package never imports ROS."""
    import subprocess

    return subprocess.run([sys.executable, "-m", "rpent_ros.security", *argv], check=False).returncode


def _version() -> str:
    try:
        return importlib.metadata.version("rpent")
    except importlib.metadata.PackageNotFoundError:  # a checkout on sys.path, not installed
        return "(not installed)"


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Like parse_args, but a flag the command does not know is reported with that command's usage
    (argparse would report it against `rpent`'s own, which lists only the commands)."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command = _subparsers(parser).choices[args.command]
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _print_tools(args: argparse.Namespace, spec: RobotSpec | None) -> int:
    try:
        return _write_tools(args, spec)
    except BrokenPipeError:  # `rpent tools ... | head` is fine
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return 0


def _write_tools(args: argparse.Namespace, spec: RobotSpec | None) -> int:
    if spec is None:  # main() found no robot to load (`rpent tools` parses --robot itself)
        try:
            spec = load_robot(args.robot).get_robot_spec()
        except RobotNotFound as exc:
            print(f"rpent: error: {exc}", file=sys.stderr)
            return 2
    try:
        tools = spec.list_tools(args)
    except ConfigError as exc:
        print(f"rpent tools: error: {exc}", file=sys.stderr)
        return 2
    if args.json_out:
        print(json.dumps([t.to_dict() for t in tools], indent=2))
        return 0
    layout = args.layout or ("list" if sys.stdout.isatty() else "compact")
    if layout == "list":
        print(tool_listing(tools), end="")
        return 0
    for t in tools:
        print(f"{t.name}{' (read-only)' if t.readonly else ''}")
        print("  " + t.description.replace("\n", "\n  "))
        schema = json.dumps(t.input_schema, indent=2) if layout == "pretty" else json.dumps(t.input_schema)
        print("  schema: " + schema.replace("\n", "\n  "))
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
