"""The options of one run (`rpent run`, and the ROS nodes' parameters): defined once, here.

The cli builds its `run` command from them and rpent_ros turns them into node parameters; neither
defines a run option of its own. The dashboard's flags are here too (`--dashboard` changes how a
run is driven), so that the runner needs nothing from the dashboard that builds on it.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rpent.robot import RobotSpec

DEFAULT_PORT = 8080  # serve-mcp --http defaults to 8765: both can run side by side
TOKEN_ENV = "RPENT_DASHBOARD_TOKEN"


def add_dashboard_args(parser: argparse.ArgumentParser) -> None:
    """Add --dashboard, --host/--port (also as --dashboard-host/--dashboard-port) and --dashboard-token.

    Call it after the robot's own flags: a robot that already uses --host or --port keeps them,
    and the dashboard is then addressed with the long names only.
    """
    taken = set(parser._option_string_actions)

    def names(short: str, long: str) -> list[str]:
        return [long] if short in taken else [short, long]

    group = parser.add_argument_group("dashboard")
    group.add_argument("--dashboard", action="store_true",
                       help="serve the operator dashboard and run tasks from it instead of running one task")
    group.add_argument(*names("--host", "--dashboard-host"), dest="dashboard_host", default="127.0.0.1",
                       help="dashboard address (default 127.0.0.1; any other address requires a token)")
    group.add_argument(*names("--port", "--dashboard-port"), dest="dashboard_port", type=int, default=DEFAULT_PORT,
                       help=f"dashboard port (default {DEFAULT_PORT}; 0 picks a free one)")
    group.add_argument("--dashboard-token",
                       help=f"token a browser must present off loopback (default ${TOKEN_ENV}, else a random one printed at start)")


def add_run_options(parser: argparse.ArgumentParser, robot_spec: RobotSpec | None = None) -> None:
    """Every option of one run, in order: the common ones, the robot's own, then the dashboard's.

    `rpent run` and the ROS nodes (whose parameters are these options) both build from here, so a
    flag added to a run is a node parameter too.
    """
    _add_common(parser)
    if robot_spec is not None:
        robot_spec.add_cli_args(parser)
    add_dashboard_args(parser)


def run_option_parser(robot_spec: RobotSpec | None = None) -> argparse.ArgumentParser:
    """A parser of exactly the options of `rpent run --robot <robot_spec>` (the ROS nodes' parameters)."""
    parser = argparse.ArgumentParser(prog="rpent run", add_help=False)
    add_run_options(parser, robot_spec)
    return parser


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", required=True, help="robot name (see `rpent robots`)")
    from rpent.planner.base import planner_arg  # registry names, or a plugin's package.module:Class

    parser.add_argument("--planner", type=planner_arg, default="replay",
                        help="who plans: api (the Anthropic API), claude_code, codex, replay (a recipe; default), "
                        "or a plugin named package.module:Class")
    parser.add_argument("--task", help="the task in words (default: the robot's default task)")
    parser.add_argument("--max-turns", type=int, default=60, help="model turns (replay: steps) before giving up (default 60)")
    parser.add_argument("--output-dir", help="where the run's record goes: a new or empty directory (default runs/<robot>-<time>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the record in --output-dir as a new segment (its files end in -N; nothing is overwritten)")
    parser.add_argument("--recipe-tag", help="name of the recipe written on success (default: the robot name)")
    parser.add_argument("--memory-dir", help="the robot's memory directory (default: $RPENT_MEMORY_DIR/<robot> or ~/.local/share/rpent/memory/<robot>)")
    parser.add_argument("--memory-access", choices=("read-only", "read-write", "inbox-write"), default="inbox-write",
                        help="what tools may write in memory (default inbox-write: only under inbox/)")
    replay = parser.add_argument_group("replay planner")
    replay.add_argument("--recipe", help="recipe JSONL file to replay (with --planner replay)")
    replay.add_argument("--continue-on-error", action="store_true", help="keep replaying after a failed step")
    model = parser.add_argument_group("model planners (api, claude_code, codex)")
    model.add_argument("--model", help="model name (default: the planner's documented default)")
    model.add_argument("--base-url", help="model endpoint, e.g. an Anthropic-compatible gateway (codex: include /v1); default from the environment")
    model.add_argument("--api-key-env", help="name of the environment variable holding the API key (default ANTHROPIC_API_KEY; codex: OPENAI_API_KEY)")
    model.add_argument("--max-wall-time", type=float, help="seconds before the planner gives up")
    output = parser.add_argument_group("output")
    output.add_argument("--quiet", action="store_true", help="only warnings and errors on the console")
    output.add_argument("--json", dest="json_logs", action="store_true", help="console log lines as JSON")
