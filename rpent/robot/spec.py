"""The contract between a robot package and the runner (and the dashboard, and the ROS toolkit node)."""

from __future__ import annotations

import argparse
import re
import string
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rpent.memory import MemoryManager, get_memory_dir
from rpent.robot.components import RuntimeNodeComponent
from rpent.tools import Tool, Toolkit
from rpent.tools.events import DashboardEventSink


class ConfigError(ValueError):
    """A run's configuration is invalid; the message names the option and the rule (exit code 2)."""


@dataclass
class RunConfig:
    """A validated run configuration, produced by `RobotSpec.parse_config`.

    `prompt_vars` fill the prompt templates (and may carry `memory_dir`); `options` holds the
    robot's own validated settings.
    """

    robot: str
    task: str
    output_dir: Path
    recipe_tag: str
    prompt_vars: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    memory_access: str = "inbox-write"


Template = Callable[[Mapping[str, Any]], str]


def template(text: str) -> Template:
    """A prompt factory from `$name` / `${name}` placeholders; a missing variable is a clear error."""
    compiled = string.Template(text)

    def render(variables: Mapping[str, Any]) -> str:
        try:
            return compiled.substitute(variables)
        except KeyError as exc:
            raise ConfigError(f"prompt_vars: the prompt needs ${exc.args[0]}, which was not set") from None

    return render


@dataclass(frozen=True)
class PromptBundle:
    """The system prompt and the first user message, rendered from a run's `prompt_vars`."""

    system: Template
    user: Template

    @classmethod
    def from_files(cls, system: Path, user: Path) -> PromptBundle:
        return cls(template(system.read_text(encoding="utf-8")), template(user.read_text(encoding="utf-8")))

    def render(self, prompt_vars: Mapping[str, Any]) -> tuple[str, str]:
        return self.system(prompt_vars), self.user(prompt_vars)


@dataclass(frozen=True)
class TaskField:
    """One field of the dashboard's task form (validated like the CLI flag it mirrors)."""

    name: str
    label: str
    kind: Literal["text", "int", "float", "choice", "bool"] = "text"
    default: Any = None
    choices: Sequence[str] = ()
    help: str = ""


@dataclass(frozen=True)
class RuntimeComponent:
    """A runtime part with a status row: `shared` ones start once per session, others once per task."""

    name: str
    label: str
    shared: bool = True


@dataclass(frozen=True)
class FrameChannel:
    """A live camera view on the dashboard."""

    name: str
    label: str
    max_fps: float = 5.0


@dataclass(frozen=True)
class Dashboard:
    task_command: str = "Start task"
    task_fields: Sequence[TaskField] = ()
    components: Sequence[RuntimeComponent] = ()
    frame_channels: Sequence[FrameChannel] = ()

    @property
    def shared_components(self) -> list[RuntimeComponent]:
        return [c for c in self.components if c.shared]

    @property
    def unique_components(self) -> list[RuntimeComponent]:
        return [c for c in self.components if not c.shared]


_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class RobotSpec:
    """Describes one robot to the runner. Subclass it in `robots/<name>/robot_spec.py`.

    The runner calls, in order: `add_cli_args`, `parse_config`, `init_runtime`, the robot module's
    `get_toolkit(...)`, and finally `stop_runtime` (always, even after an error or Ctrl-C).
    """

    name: str = ""
    prompts: PromptBundle
    dashboard: Dashboard | None = None
    default_task: str = ""
    #: The robot's Toolkit subclass; `list_tools` reads its `tools` without starting any hardware.
    toolkit_class: type[Toolkit] = Toolkit

    def list_tools(self, args: argparse.Namespace | None = None) -> list[Tool]:
        """Every tool a run offers (robot tools, then the common file/image tools), hardware untouched.

        `args`: the run's flags, for a robot whose tools depend on its configuration (franka's
        schema ranges come from its safety envelope); None means the defaults.
        """
        return Toolkit(tools=self.toolkit_class.tools).list_tools()

    def bundled_recipes(self) -> list[Path]:
        """The recipes shipped with the robot: `recipes/*.jsonl` in the package of its spec."""
        module = sys.modules.get(type(self).__module__)
        origin = getattr(module, "__file__", None)
        if not origin:
            return []
        folder = Path(origin).resolve().parent / "recipes"
        return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []

    def add_cli_args(self, parser: argparse.ArgumentParser) -> None:
        """Add the robot's own flags (the runner adds --task, --output-dir, --max-turns ...)."""

    def parse_config(self, args: argparse.Namespace) -> RunConfig:
        """Validate the flags into a RunConfig; raise ConfigError naming the flag and the rule."""
        return self.base_config(args)

    def base_config(self, args: argparse.Namespace, **prompt_vars: Any) -> RunConfig:
        """The common part of parse_config: task, output_dir, recipe_tag, prompt_vars."""
        task = (getattr(args, "task", None) or self.default_task).strip()
        if not task:
            raise ConfigError("--task: a task description is required for this robot")
        recipe_tag = getattr(args, "recipe_tag", None) or self.name
        if not _TAG.match(recipe_tag):
            raise ConfigError(f"--recipe-tag: must match {_TAG.pattern}, got {recipe_tag!r}")
        output_dir = getattr(args, "output_dir", None)
        if output_dir is None:
            raise ConfigError("--output-dir: required")
        memory_dir = getattr(args, "memory_dir", None)
        variables: dict[str, Any] = {"task": task, "robot": self.name, **prompt_vars}
        variables["memory_dir"] = str(Path(memory_dir).expanduser()) if memory_dir else str(get_memory_dir(self.name))
        return RunConfig(
            robot=self.name,
            task=task,
            output_dir=Path(output_dir),
            recipe_tag=recipe_tag,
            prompt_vars=variables,
            memory_access=getattr(args, "memory_access", None) or "inbox-write",
        )

    def init_runtime(
        self,
        config: RunConfig,
        *,
        selection: Sequence[str] | None = None,
        events: DashboardEventSink,
    ) -> dict[str, Any]:
        """Start or attach to the runtime components (all, or the named subset) and return the
        keyword arguments `get_toolkit` passes on (as `runtime_kwargs`)."""
        return {}

    def selects(self, selection: Sequence[str] | None, component: str) -> bool:
        """Whether `init_runtime(selection=...)` starts `component`: always for None, else when named.

        A name this robot does not declare (in `dashboard.components`) is a ConfigError.
        """
        if selection is None:
            return True
        declared = [c.name for c in self.dashboard.components] if self.dashboard is not None else []
        for name in selection:
            if name not in declared:
                raise ConfigError(f"selection: robot {self.name} has no runtime component {name!r} "
                                  f"(it has: {', '.join(declared) or 'none'})")
        return component in selection

    def stop_runtime(self, runtime_kwargs: dict[str, Any]) -> None:
        """Stop what `init_runtime` started; must be safe to call after a partial start."""

    def runtime_nodes(self, args: argparse.Namespace) -> Sequence[RuntimeNodeComponent]:
        """The runtime parts a ROS deployment runs in runtime nodes of their own, for these flags.

        From the flags, not a RunConfig, so a launch file can ask before any run exists. Empty (the
        default): the runtime runs only inside the process that uses it.
        """
        return ()

    def runtime_from_nodes(
        self, config: RunConfig, parts: Sequence[tuple[RuntimeNodeComponent, Any]], *, events: DashboardEventSink
    ) -> dict[str, Any]:
        """What `init_runtime` returns, built from a proxy per declared part instead of the hardware.

        `parts` pairs each entry of `runtime_nodes(args)` with a proxy implementing its protocol.
        """
        raise ConfigError(f"robot {self.name!r} declares no runtime nodes")

    def add_calibrate_args(self, parser: argparse.ArgumentParser) -> None:
        """Add the flags of `rpent calibrate` for this robot (robots without cameras to calibrate add none)."""

    def calibrate(self, args: argparse.Namespace) -> int:
        """Calibrate a camera of this robot (`rpent calibrate`); returns the exit status."""
        raise ConfigError(f"--robot: {self.name} has no camera calibration")


def memory_for(config: RunConfig, robot_name: str) -> MemoryManager:
    """The MemoryManager a robot's get_toolkit passes to its toolkit."""
    root = config.prompt_vars.get("memory_dir") or get_memory_dir(robot_name)
    memory = MemoryManager(root, config.memory_access)
    memory.ensure()
    return memory
