"""Run one task: start the runtime, run the task to a saved record, stop the runtime, whatever happens."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from rpent.planner.base import Planner, build_planner
from rpent.record.run_record import RunRecord
from rpent.robot import ConfigError, RobotSpec, RunConfig
from rpent.runner.logs import FanOutSink, ProgressSink
from rpent.runner.publish import run_id_for
from rpent.runner.task import TaskRun

log = logging.getLogger("rpent.run")

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 1, 2, 130, 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so it stops the run the way Ctrl-C does, but recorded as itself."""


def exit_code_for(interruption: BaseException) -> int:
    """The shell's convention, 128 + signal number: 130 for Ctrl-C (SIGINT), 143 for SIGTERM."""
    return EXIT_TERMINATED if isinstance(interruption, Terminated) else EXIT_INTERRUPTED


def describe_interruption(interruption: BaseException) -> str:
    return "terminated (SIGTERM)" if isinstance(interruption, Terminated) else "interrupted (Ctrl-C)"


# Planner option -> the flag that sets it: a planner's refusal names its option ("max_wall_time_s: ..."),
# which the command line reports as the flag the operator typed.
OPTION_FLAGS = {"model": "--model", "base_url": "--base-url", "api_key_env": "--api-key-env",
                "max_wall_time_s": "--max-wall-time", "recipe": "--recipe"}


def in_flag_terms(message: str) -> str:
    option, sep, rest = message.partition(": ")
    return f"{OPTION_FLAGS[option]}: {rest}" if sep and option in OPTION_FLAGS else message


def planner_options(args: argparse.Namespace, spec: RobotSpec | None = None) -> dict[str, Any]:
    """CLI flags -> keyword options of the chosen planner."""
    if args.planner == "replay":
        if not getattr(args, "recipe", None):
            raise ConfigError("--recipe: required with --planner replay" + _bundled_recipes_hint(spec))
        return {"recipe": args.recipe, "continue_on_error": getattr(args, "continue_on_error", False)}
    options: dict[str, Any] = {}
    for flag, option in (("model", "model"), ("base_url", "base_url"), ("api_key_env", "api_key_env"),
                         ("max_wall_time", "max_wall_time_s")):
        value = getattr(args, flag, None)
        if value is not None:
            options[option] = value
    options.update(getattr(args, "planner_options", None) or {})  # a plugin's own options (rpent eval)
    return options


def _bundled_recipes_hint(spec: RobotSpec | None) -> str:
    recipes = spec.bundled_recipes() if spec is not None else []
    if not recipes:
        return ""
    here = Path.cwd()
    names = [str(p.relative_to(here)) if p.is_relative_to(here) else str(p) for p in recipes]
    return f"; {spec.name}'s bundled recipes: {', '.join(names)}"


def make_planner(args: argparse.Namespace, spec: RobotSpec) -> Planner:
    """Build and pre-check the planner; any problem is a ConfigError raised before anything starts."""
    if args.max_turns < 1:
        raise ConfigError(f"--max-turns: must be >= 1, got {args.max_turns}")
    options = planner_options(args, spec)
    try:
        planner = build_planner(args.planner, **options)
        check_tools = getattr(planner, "check_tools", None)
        if check_tools is not None:  # e.g. a recipe naming a tool this robot lacks
            check_tools(spec.list_tools(args))  # with the ranges the robot's configuration sets
    except (ValueError, OSError) as exc:  # e.g. a missing API key or an unreadable recipe
        raise ConfigError(str(exc)) from exc
    return planner


@dataclass(frozen=True)
class PreparedRun:
    """A run checked and claimed, nothing started: its configuration, its planner and its record."""

    config: RunConfig
    planner: Planner
    record: RunRecord


def prepare_run(args: argparse.Namespace, spec: RobotSpec) -> PreparedRun:
    """Check the flags and the planner, then claim the record; ConfigError or RecordError (exit 2) before
    anything starts, and a refused flag leaves no directory behind."""
    config = spec.parse_config(args)
    planner = make_planner(args, spec)
    # The last check before anything starts: a used directory is refused.
    record = RunRecord.open(config.output_dir, resume=getattr(args, "resume", False))
    return PreparedRun(config, planner, record)


def run(args: argparse.Namespace, spec: RobotSpec, robot: ModuleType, prepared: PreparedRun | None = None) -> int:
    """One run to a saved record: `prepared` (prepare_run) when the caller checked and claimed it already."""
    started = getattr(args, "started", None) or time.time()
    prepared = prepared or prepare_run(args, spec)
    with prepared.record.run_log():
        return _run_recorded(args, spec, robot, prepared, started)


def _run_recorded(args: argparse.Namespace, spec: RobotSpec, robot: ModuleType, prepared: PreparedRun,
                  started: float) -> int:
    config, planner, record = prepared.config, prepared.planner, prepared.record
    run_id = run_id_for(config.robot, started)
    log.info("run %s: robot=%s planner=%s output=%s segment=%d", run_id, config.robot,
             args.planner, config.output_dir, record.number)
    events = FanOutSink(ProgressSink(log), getattr(args, "dashboard_sink", None))
    runtime_kwargs: dict[str, Any] = {}
    task: TaskRun | None = None
    interrupted: BaseException | None = None
    # SIGINT raises KeyboardInterrupt also when the run was started with it ignored (a script's `cmd &`,
    # nohup, some supervisors: Python then installs no handler), as the documented exit 130 promises.
    previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
                signal.SIGTERM: signal.signal(signal.SIGTERM, _raise_interrupt)} if _main_thread() else {}
    try:
        log.info("starting runtime components ...")
        runtime_kwargs = spec.init_runtime(config, selection=None, events=events)
        task = TaskRun(
            spec=spec, robot=robot, config=config, planner=planner, planner_name=args.planner,
            max_turns=args.max_turns, runtime_kwargs=runtime_kwargs, events=events, record=record, run_id=run_id,
        )
        interrupted = _run_interruptibly(task)
    except KeyboardInterrupt as exc:  # during runtime start
        interrupted = exc
        log.warning("%s while starting the runtime", describe_interruption(exc))
    except Exception:
        log.exception("starting the runtime failed")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        try:
            spec.stop_runtime(runtime_kwargs)
        except Exception:
            log.exception("stopping the runtime failed")
    if interrupted is not None:
        return exit_code_for(interrupted)
    return EXIT_OK if task is not None and task.succeeded else EXIT_FAILED


def _run_interruptibly(task: TaskRun) -> KeyboardInterrupt | None:
    """Run the task in a worker thread so Ctrl-C reaches the main thread, which cancels the motion
    through the toolkit instead of interrupting a handler half-way through a hardware call.
    Returns the interruption (Ctrl-C or Terminated), None if the task ended by itself."""
    done = threading.Event()

    def target() -> None:
        try:
            task.run()
        finally:
            done.set()

    # Wait on an Event, not Thread.join: on CPython 3.11 a join interrupted by KeyboardInterrupt can
    # leave the thread looking finished while it is still writing the run's record.
    try:  # a signal can arrive while the thread is starting: the task is cancelled all the same
        threading.Thread(target=target, name="rpent-task", daemon=True).start()
        while not done.wait(0.25):
            pass
        return None
    except KeyboardInterrupt as exc:
        reason = describe_interruption(exc)
        log.warning("%s: cancelling the active tool call", reason)
        task.abort(reason)
        try:
            done.wait(60)  # the record is written before the task ends
        except KeyboardInterrupt:
            log.error("second interrupt: leaving without waiting for the record")
        return exc


def _raise_interrupt(signum, frame) -> None:
    raise Terminated


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def default_output_dir(robot: str, started: float | None = None) -> Path:
    """runs/<run id>: the folder is named by the run's own timestamp."""
    return Path("runs") / run_id_for(robot, time.time() if started is None else started)
