"""One episode of a sweep as an ordinary run: the same runner and record as `rpent run --output-dir`.

This is what a Ray worker executes; it imports nothing of Ray, so it also runs (and is timed) alone.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path
from typing import Any

from rpent.eval.records import MEMORY_DIR, RECIPES_DIR, read_result, record_dir, set_aside_partial, strip_ansi
from rpent.eval.sweep import Episode, Sweep, SweepError
from rpent.record.run_log import append_failure
from rpent.record.segments import RecordError
from rpent.robot import ConfigError, load_robot
from rpent.runner.options import run_option_parser

log = logging.getLogger("rpent.eval")

#: Sweep axis -> the robot flags that take it, first match wins (franka's scene seed, LIBERO's sim seed).
AXIS_FLAGS = {"suite": ("--suite",), "task": ("--task-id",), "init_state": ("--init-state",),
              "seed": ("--sim-seed", "--seed")}
AXIS_FIELDS = {"suite": "suites", "task": "tasks", "init_state": "init_states", "seed": "seeds"}
#: The robot flag that takes an episode's own loopback addresses for its simulator (Sweep.sim_hosts).
SIM_HOSTS_FLAG = "--sim-hosts"


def robot_argv(sweep: Sweep, episode: Episode, parser: argparse.ArgumentParser, sim_hosts: str | None = None) -> list[str]:
    """The robot flags of one episode; a swept axis the robot has no flag for is a SweepError.

    `sim_hosts` is the episode's own block of the sweep's simulator addresses, given to a simulated
    robot that takes --sim-hosts (unless robot_args name addresses themselves).
    """
    known = set(parser._option_string_actions)
    argv: list[str] = []
    for axis, value in episode.fields().items():
        if axis not in AXIS_FLAGS or value is None:
            continue
        flag = next((f for f in AXIS_FLAGS[axis] if f in known), None)
        if flag is None:
            raise SweepError(f"{AXIS_FIELDS[axis]}: robot {sweep.robot} has no {' or '.join(AXIS_FLAGS[axis])} flag")
        argv += [flag, str(value)]
    if axis_needs_sim(sweep, known):
        argv.append("--sim")
    if sweep.vla_endpoint is not None:
        if "--vla-endpoint" not in known:
            raise SweepError(f"vla_endpoint: robot {sweep.robot} has no --vla-endpoint flag")
        argv += ["--vla-endpoint", sweep.vla_endpoint]
    argv += list(sweep.robot_args)
    if sim_hosts and SIM_HOSTS_FLAG in known and "--sim" in argv and SIM_HOSTS_FLAG not in argv:
        argv += [SIM_HOSTS_FLAG, sim_hosts]
    return argv


def axis_needs_sim(sweep: Sweep, known: set[str]) -> bool:
    # --sim-seed is only accepted together with --sim (franka): a seeded scene is a simulated one.
    return bool(sweep.seeds) and "--sim-seed" in known and "--sim" in known and "--sim" not in sweep.robot_args


def run_args(sweep: Sweep, episode: Episode, out: Path, *, sim_hosts: str | None = None,
             recipe: Path | None = None) -> tuple[argparse.Namespace, Any, Any]:
    """(args as `rpent run` would parse them, the robot's spec, the robot module); `recipe` replaces
    the sweep's recipe path of this episode (the driver's copy, where this node lacks the file)."""
    module = load_robot(sweep.robot)
    spec = module.get_robot_spec()
    # `rpent run`'s own options, so every run option has the default `rpent run` gives it.
    parser = run_option_parser(spec)
    parser.prog, parser.exit_on_error = f"rpent eval ({episode.id})", False
    argv = robot_argv(sweep, episode, parser, sim_hosts)
    try:
        args, unknown = parser.parse_known_args(["--robot", sweep.robot, *argv])
    except (argparse.ArgumentError, SystemExit) as exc:
        raise SweepError(f"robot_args: robot {sweep.robot} refuses {' '.join(argv)} ({exc})") from None
    if unknown:
        raise SweepError(f"robot_args: robot {sweep.robot} has no flag {' '.join(unknown)}")
    recipe = recipe or sweep.recipe_for(episode)
    shared_memory = sweep.memory_dir is not None
    args.__dict__.update(
        planner=sweep.planner,
        recipe=str(recipe) if recipe is not None else None,
        planner_options=dict(sweep.planner_options),
        model=sweep.model, base_url=sweep.base_url, api_key_env=sweep.api_key_env,
        max_wall_time=sweep.max_wall_time_s,
        max_turns=sweep.max_turns,
        output_dir=str(record_dir(out, episode)),
        # Episodes must not learn from each other unless the sweep says so: each gets an empty memory.
        memory_dir=sweep.memory_dir if shared_memory else str(out / MEMORY_DIR / episode.id),
        memory_access=sweep.memory_access if shared_memory else "inbox-write",
        started=time.time(),
    )
    return args, spec, module


def run_episode(sweep_data: dict[str, Any], episode_fields: dict[str, Any], out: str, *, sim_hosts: str | None = None,
                recipe_text: str | None = None, driver_folder: str | None = None) -> dict[str, Any]:
    """Run one episode into `<out>/<episode id>/` and return its result.json.

    A complete record is returned as it is (a retried task whose first attempt finished); a partial
    one, left by a worker that died, is set aside under `_attempts/` first. `recipe_text` is the
    driver's copy of the episode's recipe, replayed from the sweep folder where this node has no such
    file (or another one). Relative paths in robot_args resolve in `driver_folder` where this node has
    it. Any failure is raised as an EpisodeFailed of one line; its traceback goes to the record's run.log.
    """
    sweep = Sweep.model_validate(sweep_data)
    episode = Episode(**episode_fields)
    record = record_dir(Path(out), episode)
    try:
        if driver_folder and Path(driver_folder).is_dir():
            os.chdir(driver_folder)
        return _run_episode(sweep, episode, Path(out), sim_hosts, recipe_text)
    except EpisodeFailed:
        raise
    except SweepError as exc:  # names the field
        message = str(exc) if str(exc).startswith(f"episode {episode.id}: ") else f"episode {episode.id}: {exc}"
        raise episode_failed(message, record) from None
    except Exception as exc:
        raise episode_failed(f"episode {episode.id}: {_one_line(exc)}", record) from None


class EpisodeFailed(RuntimeError):
    """An episode that left no complete record. Its message is one line for results.json, naming
    where the traceback is: the record's run.log."""


def episode_failed(message: str, record: Path) -> EpisodeFailed:
    """The failure of one episode, its traceback (if one is being handled) appended to the record's run.log."""
    log_file = append_failure(record, message, log.name)
    return EpisodeFailed(f"{message} (traceback in {log_file})")


def _run_episode(sweep: Sweep, episode: Episode, out_dir: Path, sim_hosts: str | None,
                 recipe_text: str | None) -> dict[str, Any]:
    from rpent.runner.run import prepare_run, run

    record = record_dir(out_dir, episode)
    done = read_result(record)
    if done is not None:
        return done
    moved = set_aside_partial(out_dir, episode)
    if moved is not None:
        log.warning("episode %s: a previous attempt died; its partial record is in %s", episode.id, moved)
    recipe = _recipe_here(sweep, episode, out_dir, recipe_text)
    args, spec, module = run_args(sweep, episode, out_dir, sim_hosts=sim_hosts, recipe=recipe)
    # run.log takes everything, as under `rpent run` (a fresh worker's root logger passes warnings only).
    logging.getLogger().setLevel(logging.DEBUG)
    log.info("episode %s starting in pid %d", episode.id, os.getpid())
    errors = _FirstError()
    logging.getLogger().addHandler(errors)
    try:
        try:
            prepared = prepare_run(args, spec)  # the episode's RunRecord, claimed before anything starts
        except (ConfigError, RecordError) as exc:  # both name their field
            raise SweepError(f"episode {episode.id}: {exc}") from None
        run(args, spec, module, prepared)
    finally:
        logging.getLogger().removeHandler(errors)
    result = read_result(prepared.record.output_dir)
    if result is None:
        # The run logged why (with its traceback) into run.log: that is the episode's one line.
        why = errors.line or f"the run ended without writing {prepared.record.result_file}"
        raise episode_failed(f"episode {episode.id}: {why}", record)
    return result


def _recipe_here(sweep: Sweep, episode: Episode, out_dir: Path, text: str | None) -> Path | None:
    """The episode's recipe as this node sees it, or the driver's copy (`text`) in the sweep folder."""
    path = sweep.recipe_for(episode)
    if path is None or text is None:
        return path
    try:
        if path.read_text() == text:
            return path
    except OSError:
        pass
    copy = out_dir / RECIPES_DIR / episode.id / path.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text(text)
    log.warning("episode %s: %s is not on this node as the driver read it; replaying the driver's copy %s",
                episode.id, path, copy)
    return copy


class _FirstError(logging.Handler):
    """Keeps the first error logged with an exception: why a run that wrote no result.json ended."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.line: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.line is None and record.exc_info and record.exc_info[1] is not None:
            self.line = f"{record.getMessage()}: {_one_line(record.exc_info[1])}"


def _one_line(exc: BaseException) -> str:
    text = strip_ansi(f"{type(exc).__name__}: {exc}").strip()
    return text.splitlines()[0] if text else type(exc).__name__
