"""Which planners a dashboard session can offer, from what is installed and configured here.

Each model planner is asked by building it with the session's flags: its own constructor checks
the API key, the SDK and the CLI it needs, so the page offers exactly what would start. Replay is
always offered, with the robot's bundled recipes (`<robot package>/recipes/*.jsonl`) and the
`--recipe` given on the command line.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from rpent.robot import ConfigError, RobotSpec
from rpent.runner.run import make_planner

log = logging.getLogger("rpent.dashboard")

MODEL_PLANNERS = ("api", "claude_code", "codex")


@dataclass(frozen=True)
class PlannerChoice:
    name: str
    available: bool
    reason: str = ""  # why it is not offered
    recipes: tuple[str, ...] = field(default_factory=tuple)  # replay: the recipe files it may replay

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "available": self.available, "reason": self.reason, "recipes": list(self.recipes)}


def short_path(path: str, robot: ModuleType) -> str:
    """How the page names a recipe file: relative to the folder the dashboard was started in, else
    a bundled one from the robots' folder up (robots/<name>/recipes/x.jsonl), else under ~; the
    full path otherwise (and always in the page's tooltip)."""
    target = Path(path)
    origin = getattr(robot, "__file__", None)
    roots = [(Path.cwd(), "")]
    if origin:
        roots.append((Path(origin).resolve().parents[2], ""))  # <root>/robots/<name>/__init__.py
    roots.append((Path.home(), "~/"))
    for root, prefix in roots:
        if target.is_relative_to(root) and target != root:
            return prefix + target.relative_to(root).as_posix()
    return path


def planner_choices(args: argparse.Namespace, spec: RobotSpec, robot: ModuleType) -> list[PlannerChoice]:
    recipes = [str(p) for p in spec.bundled_recipes()]
    given = getattr(args, "recipe", None)
    if given and str(Path(given).resolve()) not in recipes:
        recipes.insert(0, str(Path(given).resolve()))
    choices = [PlannerChoice("replay", bool(recipes), "" if recipes else "no recipe: pass --recipe FILE", tuple(recipes))]
    for name in MODEL_PLANNERS:
        probe = argparse.Namespace(**{**vars(args), "planner": name})
        try:
            make_planner(probe, spec)
        except ConfigError as exc:
            choices.append(PlannerChoice(name, False, str(exc)))
            continue
        except Exception as exc:  # an SDK that fails to import or set up: not offered, and said why
            choices.append(PlannerChoice(name, False, f"{type(exc).__name__}: {exc}"))
            continue
        choices.append(PlannerChoice(name, True))
    return choices


def default_choice(args: argparse.Namespace, choices: list[PlannerChoice]) -> PlannerChoice | None:
    """The command line's planner if it can run here, else the first that can."""
    by_name = {c.name: c for c in choices}
    wanted = by_name.get(getattr(args, "planner", None) or "")
    if wanted is not None and wanted.available:
        return wanted
    return next((c for c in choices if c.available), None)
