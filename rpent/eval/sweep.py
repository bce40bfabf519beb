"""What a sweep is: the robot, the episodes to run (the product of its axes and repeats), the planner, limits.

A sweep comes from a YAML file or from `rpent eval` flags (flags override the file). Validation
names the field and the rule, so `rpent eval` can refuse a bad sweep before Ray starts.
"""

from __future__ import annotations

import itertools
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rpent.loopback import hosts_text, loopback_hosts, split_hosts
from rpent.robot import ConfigError
from rpent.rule_words import pydantic_rule

#: Placeholders a recipe path may use; each episode fills in its own values.
RECIPE_FIELDS = ("robot", "suite", "task", "init_state", "seed", "repeat")
REGISTRY_PLANNERS = ("api", "claude_code", "codex", "replay")
#: The loopback addresses simulated robots' episodes share out (robots with a --sim-hosts flag, e.g.
#: franka's franky-sim, which binds one address per arm): each concurrent episode gets a block of its own.
DEFAULT_SIM_HOSTS = "127.0.0.1-254"


class SweepError(ConfigError):
    """A sweep that cannot run; the message starts with the field it is about."""


class Sweep(BaseModel):
    """One evaluation sweep. Axes left empty are not swept (the robot's default is used)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    robot: str = Field(min_length=1)
    suites: list[str] = Field(default_factory=list, description="LIBERO suites (--suite)")
    tasks: list[int] = Field(default_factory=list, description="task ids within each suite (--task-id)")
    init_states: list[int] = Field(default_factory=list, description="LIBERO initial states (--init-state)")
    seeds: list[int] = Field(default_factory=list, description="scene seeds (--sim-seed, or --seed)")
    repeats: int = Field(default=1, ge=1, le=1000)
    planner: str = "replay"
    recipe: str | None = Field(default=None, description="replay recipe path; may use {suite} {task} {init_state} {seed} {repeat}")
    planner_options: dict[str, Any] = Field(default_factory=dict, description="keyword options of a planner plugin")
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    vla_endpoint: str | None = None
    robot_args: list[str] = Field(default_factory=list, description="more robot flags, the same for every episode")
    max_turns: int = Field(default=60, ge=1)
    max_wall_time_s: float | None = Field(default=None, gt=0, description="per episode")
    token_budget: int | None = Field(default=None, ge=1, description="for the whole sweep")
    retries: int = Field(default=2, ge=0, le=20, description="re-runs of an episode whose worker crashed")
    concurrency: int = Field(default=2, ge=1, le=1024)
    cpus_per_episode: float = Field(default=1.0, gt=0)
    memory_per_episode_mb: int = Field(default=3072, ge=64)
    gpus_per_episode: float = Field(default=0.0, ge=0)
    memory_dir: str | None = Field(default=None, description="shared robot memory; default: one empty memory per episode")
    sim_hosts: str = Field(default=DEFAULT_SIM_HOSTS, description="loopback addresses of the episodes' simulators "
                           "(--sim-hosts); each concurrent episode gets its own block of them")
    memory_access: str = "read-only"

    @field_validator("tasks", "init_states", "seeds")
    @classmethod
    def _non_negative_unique(cls, values: list[int]) -> list[int]:
        if any(v < 0 for v in values):
            raise ValueError("must be integers >= 0")
        if len(set(values)) != len(values):
            raise ValueError("must not repeat a value")
        return values

    @field_validator("suites")
    @classmethod
    def _unique_suites(cls, values: list[str]) -> list[str]:
        if len(set(values)) != len(values):
            raise ValueError("must not repeat a value")
        return values

    @field_validator("planner")
    @classmethod
    def _planner_name(cls, value: str) -> str:
        if value not in REGISTRY_PLANNERS and not re.fullmatch(r"[\w.]+:\w+", value):
            raise ValueError(f"must be one of {', '.join(REGISTRY_PLANNERS)} or 'package.module:Class', got {value!r}")
        return value

    @field_validator("memory_access")
    @classmethod
    def _access(cls, value: str) -> str:
        if value not in ("read-only", "read-write", "inbox-write"):
            raise ValueError(f"must be read-only, read-write or inbox-write, got {value!r}")
        return value

    @field_validator("recipe")
    @classmethod
    def _recipe_template(cls, value: str | None) -> str | None:
        if value is None:
            return value
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(value) if name is not None}
        except ValueError as exc:
            raise ValueError(f"is not a valid path template ({exc})") from None
        unknown = names - set(RECIPE_FIELDS)
        if unknown:
            raise ValueError(f"unknown placeholder(s) {sorted(unknown)}; known: {', '.join(RECIPE_FIELDS)}")
        return value

    @field_validator("sim_hosts")
    @classmethod
    def _loopback_range(cls, value: str) -> str:
        try:
            loopback_hosts(value, "sim_hosts")
        except ValueError as exc:  # pydantic puts the field's name in front itself
            raise ValueError(str(exc).removeprefix("sim_hosts: ")) from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Sweep:
        if self.planner == "replay" and not self.recipe:
            raise ValueError("recipe: required with planner replay")
        count = len(loopback_hosts(self.sim_hosts, "sim_hosts"))
        if count < self.concurrency:
            raise ValueError(f"sim_hosts: {count} addresses cannot give each of {self.concurrency} concurrent episodes "
                             "one of its own; name more, or lower concurrency")
        return self

    def sim_host_blocks(self) -> list[str]:
        """One block of `sim_hosts` per concurrent episode (as --sim-hosts takes it), disjoint."""
        return [hosts_text(block) for block in split_hosts(loopback_hosts(self.sim_hosts, "sim_hosts"), self.concurrency)]

    def with_paths_from(self, folder: Path) -> Sweep:
        """The sweep with its relative paths (recipe, memory_dir) made absolute against `folder`, where
        it was typed: a Ray worker runs in another folder, often on another machine."""
        update = {}
        for name in ("recipe", "memory_dir"):
            value = getattr(self, name)
            if value is not None and not Path(value).expanduser().is_absolute():
                update[name] = str(folder / Path(value).expanduser())
            elif value is not None:
                update[name] = str(Path(value).expanduser())
        return self.model_copy(update=update)

    def episodes(self) -> list[Episode]:
        """Every episode of the sweep, in a stable order (the order of results.json)."""
        axes = [("suite", self.suites), ("task", self.tasks), ("init_state", self.init_states), ("seed", self.seeds)]
        present = [(name, values) for name, values in axes if values]
        combos = itertools.product(*(values for _, values in present), range(self.repeats))
        episodes = []
        for combo in combos:
            values = dict(zip([name for name, _ in present], combo[:-1], strict=True))
            episodes.append(Episode(robot=self.robot, repeat=combo[-1], **values))
        return episodes

    def recipe_for(self, episode: Episode) -> Path | None:
        if self.recipe is None:
            return None
        return Path(self.recipe.format(**episode.fields())).expanduser()

    def check_recipes(self) -> None:
        """Replay: every episode's recipe exists (refused before anything starts)."""
        if self.planner != "replay":
            return
        for episode in self.episodes():
            path = self.recipe_for(episode)
            if path is not None and not path.is_file():
                raise SweepError(f"recipe: no file {path} for episode {episode.id}")


@dataclass(frozen=True)
class Episode:
    """One run of the sweep; `id` names its record folder `<out>/<id>/`."""

    robot: str
    repeat: int
    suite: str | None = None
    task: int | None = None
    init_state: int | None = None
    seed: int | None = None

    @property
    def id(self) -> str:
        parts = [self.suite or self.robot]
        if self.task is not None:
            parts.append(f"task{self.task:02d}")
        if self.init_state is not None:
            parts.append(f"init{self.init_state:02d}")
        if self.seed is not None:
            parts.append(f"seed{self.seed}")
        parts.append(f"rep{self.repeat}")
        return "-".join(parts)

    def fields(self) -> dict[str, Any]:
        return {"robot": self.robot, "suite": self.suite, "task": self.task, "init_state": self.init_state,
                "seed": self.seed, "repeat": self.repeat}


def load_sweep(path: str | Path | None, overrides: dict[str, Any]) -> Sweep:
    """The sweep in a YAML file (if any) with flag values laid over it; SweepError names the field."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text())
        except OSError as exc:
            raise SweepError(f"--sweep: cannot read {path} ({exc.strerror})") from None
        except yaml.YAMLError as exc:
            raise SweepError(f"--sweep: {path} is not valid YAML ({exc})") from None
        if not isinstance(loaded, dict):
            raise SweepError(f"--sweep: {path} must hold a mapping of sweep fields, got {type(loaded).__name__}")
        data.update(loaded)
    data.update({k: v for k, v in overrides.items() if v is not None})
    return parse_sweep(data)


def parse_sweep(data: dict[str, Any]) -> Sweep:
    try:
        return Sweep.model_validate(data)
    except ValidationError as exc:
        raise SweepError(_first_error(exc)) from None


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    message = pydantic_rule(error)  # the house's words: "repeats: must be >= 1, got 0"
    if error["type"] == "extra_forbidden":
        message = f"unknown field (known: {', '.join(Sweep.model_fields)})"
    if not where:  # a model-level rule names its field itself ("recipe: required ...")
        return message
    return f"{where}: {message}"


def parse_id_list(text: str, field: str) -> list[int]:
    """`0-9`, `0,2,5`, `0-3,7` -> a list of ids; the error names the flag."""
    ids: list[int] = []
    for part in text.split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise SweepError(f"{field}: expected ids like 0-9 or 0,2,5, got {text!r}")
        lo, hi = int(match[1]), int(match[2] or match[1])
        if hi < lo:
            raise SweepError(f"{field}: range {part} runs backwards")
        ids.extend(range(lo, hi + 1))
    return ids
