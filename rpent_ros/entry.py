"""Where every node executable starts (rpent_ros/scripts/*, and each robot's robots/*/ros/scripts/*):
import the node's module, then run it.

A launch stopped right after it started sends SIGINT while a node is still importing rclpy and
rpent; Python would print a KeyboardInterrupt traceback and exit 1. Nothing has started yet then,
so the node ends quietly with 0, as a Ctrl-C during its start does (node_main). This module imports
nothing heavy, so the window before the `try` is as short as it can be.
"""

from __future__ import annotations

import importlib
import sys


def run(module: str, function: str = "main") -> None:
    try:
        main = getattr(importlib.import_module(module), function)
    except KeyboardInterrupt:
        sys.exit(0)
    main()
