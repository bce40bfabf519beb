"""The dashboard's command-line flags; imports nothing heavy, so `rpent run` works without the web stack."""

from __future__ import annotations

import argparse

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
