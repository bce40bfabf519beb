"""`rpent stop`: latch (or, with --release, release) the stop of a robot from the operator's terminal.

    rpent stop --robot franka --reason "the cable is caught"     every rpent run / serve-mcp / dashboard of it stops
    rpent stop --robot franka --release                          the operator releases it

It finds the runs by their robot: every toolkit of a robot on this machine follows the robot's latch
file in the state directory (rpent.tools.stop_latch; RPENT_STATE_DIR, else $XDG_STATE_HOME/rpent, else
~/.local/state/rpent), so the running ones stop within 50 ms and the ones started later come up stopped.
A toolkit node serves the same as ROS `/toolkit/stop` and `/toolkit/release_stop`.
"""

from __future__ import annotations

import argparse
import getpass
import logging
import socket
from pathlib import Path

from rpent.tools.stop_latch import robot_latch


def add_stop_parser(commands: argparse._SubParsersAction) -> None:
    stop = commands.add_parser(
        "stop", help="latch a robot's stop (every run of it stops and stays still), or --release it",
        description="Latch the stop of every run of a robot on this machine: the running motions are cancelled "
        "and every motion is refused until an operator releases it (--release). A run started later comes up "
        "stopped. No tool of the model can release it.")
    stop.add_argument("--robot", required=True, help="robot name (the runs of this robot stop)")
    stop.add_argument("--reason", default="", help="why, for the record and the refusals' line")
    stop.add_argument("--release", action="store_true", help="release the stop (the operator's decision)")
    stop.add_argument("--state-dir", default=None,
                      help="the robots' state directory (default: $RPENT_STATE_DIR, else ~/.local/state/rpent)")


def stop_command(args: argparse.Namespace) -> int:
    logging.getLogger("rpent.tools.stop_latch").setLevel(logging.ERROR)  # this command prints what it did
    state_dir = Path(args.state_dir).expanduser() if args.state_dir else None
    latch = robot_latch(args.robot, state_dir)
    who = f"rpent stop ({getpass.getuser()}@{socket.gethostname()})"
    if args.release:
        event = latch.release(who)
        print(f"rpent stop: {args.robot}: released" if event is not None else f"rpent stop: {args.robot}: not stopped")
        return 0
    latch.trigger(who, args.reason)
    print(f"rpent stop: {args.robot}: {latch.line()}")
    return 0
