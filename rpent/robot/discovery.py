"""Robots are found by name: the module `robots.<name>`, or an entry point in group `rpent.robots`.

There is no central list to edit: a lab ships its robot as its own package with an entry point
`[rpent.robots] my_arm = my_lab.my_arm` whose module provides get_robot_spec and get_toolkit.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import pkgutil
import re
from collections.abc import Sequence
from types import ModuleType

ENTRY_POINT_GROUP = "rpent.robots"
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class RobotNotFound(LookupError):
    pass


def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _is_robot(module: ModuleType) -> bool:
    return callable(getattr(module, "get_robot_spec", None)) and callable(getattr(module, "get_toolkit", None))


def load_robot(name: str) -> ModuleType:
    """Import a robot package by name; raise RobotNotFound with the installed names."""
    if not _NAME.match(name or ""):
        raise RobotNotFound(f"--robot: {name!r} is not a robot name (lowercase letters, digits, _)")
    entry = _entry_points().get(name)
    if entry is not None:
        module = entry.load()
    else:
        try:
            module = importlib.import_module(f"robots.{name}")
        except ModuleNotFoundError as exc:
            if exc.name not in (f"robots.{name}", "robots"):
                raise  # the robot exists but one of its dependencies is missing: say that, not "unknown"
            raise RobotNotFound(f"--robot: unknown robot {name!r} (installed: {', '.join(list_robots()) or 'none'})") from None
    if not isinstance(module, ModuleType) or not _is_robot(module):
        raise RobotNotFound(f"--robot: {name!r} does not provide get_robot_spec() and get_toolkit()")
    return module


def list_robots() -> list[str]:
    """Names of the robots installed here (robots.* packages and entry points), without importing them."""
    names = set(_entry_points())
    # find_spec locates the robots package without running it: listing imports no robot code.
    package = importlib.util.find_spec("robots")
    if package is not None and package.submodule_search_locations is not None:
        names.update(
            info.name for info in pkgutil.iter_modules(package.submodule_search_locations)
            if info.ispkg and not info.name.startswith("_")
        )
    return sorted(names)


def robot_named_in(argv: Sequence[str]) -> str | None:
    """The value of `--robot NAME` or `--robot=NAME` in a command line that is not parsed yet.

    A command reads it first because the robot's spec adds the robot's own options to the parser.
    """
    for i, arg in enumerate(argv):
        if arg == "--robot" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--robot="):
            return arg.split("=", 1)[1]
    return None
