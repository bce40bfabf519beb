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

from rpent.eval.records import MEMORY_DIR, read_result, record_dir, set_aside_partial
from rpent.eval.sweep import Episode, Sweep, SweepError
from rpent.robot import ConfigError, load_robot
from rpent.runner.options import run_option_parser
from rpent.tools.record import RecordError

log = logging.getLogger("rpent.eval")

#: Sweep axis -> the robot flags that take it, first match wins (franka's scene seed, LIBERO's sim seed).
AXIS_FLAGS = {"suite": ("--suite",), "task": ("--task-id",), "init_state": ("--init-state",),
              "seed": ("--sim-seed", "--seed")}
AXIS_FIELDS = {"suite": "suites", "task": "tasks", "init_state": "init_states", "seed": "seeds"}


def robot_argv(sweep: Sweep, episode: Episode, parser: argparse.ArgumentParser) -> list[str]:
    """The robot flags of one episode; a swept axis the robot has no flag for is a SweepError."""
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
    return argv + list(sweep.robot_args)


def axis_needs_sim(sweep: Sweep, known: set[str]) -> bool:
    # --sim-seed is only accepted together with --sim (franka): a seeded scene is a simulated one.
    return bool(sweep.seeds) and "--sim-seed" in known and "--sim" in known and "--sim" not in sweep.robot_args


def run_args(sweep: Sweep, episode: Episode, out: Path) -> tuple[argparse.Namespace, Any, Any]:
    """(args as `rpent run` would parse them, the robot's spec, the robot module)."""
    module = load_robot(sweep.robot)
    spec = module.get_robot_spec()
    # `rpent run`'s own options, so every run option has the default `rpent run` gives it.
    parser = run_option_parser(spec)
    parser.prog, parser.exit_on_error = f"rpent eval ({episode.id})", False
    argv = robot_argv(sweep, episode, parser)
    try:
        args = parser.parse_args(["--robot", sweep.robot, *argv])
    except (argparse.ArgumentError, SystemExit) as exc:
        raise SweepError(f"robot_args: robot {sweep.robot} refuses {' '.join(argv)} ({exc})") from None
    recipe = sweep.recipe_for(episode)
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


def run_episode(sweep_data: dict[str, Any], episode_fields: dict[str, Any], out: str) -> dict[str, Any]:
    """Run one episode into `<out>/<episode id>/` and return its result.json.

    A complete record is returned as it is (a retried task whose first attempt finished); a partial
    one, left by a worker that died, is set aside under `_attempts/` first.
    """
    from rpent.eval.sweep import Sweep as SweepModel
    from rpent.runner.run import run

    sweep = SweepModel.model_validate(sweep_data)
    episode = Episode(**episode_fields)
    out_dir = Path(out)
    record = record_dir(out_dir, episode)
    done = read_result(record)
    if done is not None:
        return done
    moved = set_aside_partial(out_dir, episode)
    if moved is not None:
        log.warning("episode %s: a previous attempt died; its partial record is in %s", episode.id, moved)
    args, spec, module = run_args(sweep, episode, out_dir)
    log.info("episode %s starting in pid %d", episode.id, os.getpid())
    try:
        run(args, spec, module)
    except (ConfigError, RecordError) as exc:  # both name their field
        raise SweepError(f"episode {episode.id}: {exc}") from None
    result = read_result(record)
    if result is None:
        raise RuntimeError(f"episode {episode.id}: the run ended without writing {record / 'result.json'}")
    return result
