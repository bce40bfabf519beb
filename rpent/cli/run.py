"""`rpent run`: one task from start to a saved record, cleaning up whatever happens."""

from __future__ import annotations

import argparse
import logging
import queue
import signal
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from rpent.cli.artifacts import publish_to_memory, qualifies_for_memory, run_id_for, write_json
from rpent.cli.logs import FanOutSink, ProgressSink, add_run_log
from rpent.planner.base import AbortRequest, PlannerResult, PlannerStatus, build_planner
from rpent.robot import ConfigError, RobotSpec, RunConfig

log = logging.getLogger("rpent.run")

EXIT_OK, EXIT_FAILED, EXIT_CONFIG, EXIT_INTERRUPTED = 0, 1, 2, 130


def planner_options(args: argparse.Namespace) -> dict[str, Any]:
    """CLI flags -> keyword options of the chosen planner."""
    if args.planner == "replay":
        if not args.recipe:
            raise ConfigError("--recipe: required with --planner replay")
        return {"recipe": args.recipe, "continue_on_error": args.continue_on_error}
    options: dict[str, Any] = {}
    if args.model:
        options["model"] = args.model
    if args.base_url:
        options["base_url"] = args.base_url
    if args.api_key_env:
        options["api_key_env"] = args.api_key_env
    if args.max_wall_time is not None:
        options["max_wall_time_s"] = args.max_wall_time
    return options


class _Interrupted(Exception):
    pass


def run(args: argparse.Namespace, spec: RobotSpec, robot: ModuleType) -> int:
    started = time.time()
    config = spec.parse_config(args)  # ConfigError -> exit 2 before anything starts
    if args.max_turns < 1:
        raise ConfigError(f"--max-turns: must be >= 1, got {args.max_turns}")
    options = planner_options(args)
    try:
        planner = build_planner(args.planner, **options)
        check_tools = getattr(planner, "check_tools", None)
        if check_tools is not None:  # e.g. a recipe naming a tool this robot lacks: refuse before anything starts
            check_tools(spec.list_tools())
    except (ValueError, OSError) as exc:  # e.g. a missing API key or an unreadable recipe
        raise ConfigError(str(exc)) from exc

    output_dir = config.output_dir
    output_dir.mkdir(parents=True, exist_ok=True)
    run_log = add_run_log(output_dir)
    log.info("run %s: robot=%s planner=%s output=%s", run_id_for(config.robot, started), config.robot, args.planner, output_dir)

    events = FanOutSink(ProgressSink(log), getattr(args, "dashboard_sink", None))
    runtime_kwargs: dict[str, Any] = {}
    toolkit = None
    result: PlannerResult | None = None
    interrupted = False
    error: str | None = None
    inputs: queue.Queue[Any] = queue.Queue()
    previous_term = signal.signal(signal.SIGTERM, _raise_interrupt) if _main_thread() else None
    try:
        log.info("starting runtime components ...")
        runtime_kwargs = spec.init_runtime(config, selection=None, events=events)
        toolkit = robot.get_toolkit(runtime_kwargs=runtime_kwargs, dashboard_events=events, config=config)
        system_prompt, user_message = spec.prompts.render(config.prompt_vars)
        log.info("runtime ready; planning with %s (max %d turns)", args.planner, args.max_turns)
        result = _solve_interruptibly(planner, toolkit, system_prompt, user_message, args.max_turns, inputs)
    except KeyboardInterrupt:
        interrupted = True
        log.warning("interrupted: cancelling the active tool call")
        if toolkit is not None:
            toolkit.cancel_active_and_wait(timeout=10, reason="interrupted (Ctrl-C)")
    except ConfigError:
        raise
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        log.exception("run failed: %s", error)
    finally:
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
        code = _finish_run(config, args, spec, toolkit, runtime_kwargs, result, interrupted, error, started)
        logging.getLogger().removeHandler(run_log)
        run_log.close()
    return code


def _solve_interruptibly(planner, toolkit, system_prompt, user_message, max_turns, inputs) -> PlannerResult:
    """Run the planner in a worker thread so Ctrl-C reaches the main thread, which cancels the motion
    through the toolkit (instead of interrupting a handler half-way through a hardware call)."""
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = planner.solve(
                system_prompt=system_prompt, user_message=user_message, toolkit=toolkit,
                max_turns=max_turns, input_queue=inputs,
            )
        except BaseException as exc:  # re-raised in the main thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="rpent-planner", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.25)
    except KeyboardInterrupt:
        inputs.put(AbortRequest("interrupted (Ctrl-C)"))
        toolkit.cancel_active_and_wait(timeout=10, reason="interrupted (Ctrl-C)")
        worker.join(15)
        raise
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _finish_run(config: RunConfig, args, spec: RobotSpec, toolkit, runtime_kwargs, result, interrupted, error, started) -> int:
    """Always: solved(), result.json, transcript.json, recipe, memory publication, video, runtime stop."""
    output_dir = config.output_dir
    finish = None
    solved = None
    recipe_path = None
    episode = None
    published = None
    try:
        if toolkit is not None:
            try:
                solved = toolkit.solved()
            except Exception:
                log.exception("solved() failed")
        finish = toolkit.finish_result if toolkit is not None else None
        if result is not None:
            write_json(output_dir / "transcript.json", result.transcript)
        succeeded = qualifies_for_memory(finish, solved) and not interrupted and error is None
        if toolkit is not None and succeeded:
            recipe_path = toolkit.write_recipe(config.recipe_tag)
    finally:
        if toolkit is not None:
            try:
                episode = toolkit.close(timeout=30)
            except Exception:
                log.exception("closing the toolkit failed")
        try:
            spec.stop_runtime(runtime_kwargs)
        except Exception:
            log.exception("stopping the runtime failed")
    status = "interrupted" if interrupted else (result.status.value if result is not None else "error")
    summary = {
        "robot": config.robot,
        "task": config.task,
        "planner": args.planner,
        "status": status,
        "stop_reason": result.stop_reason if result is not None else (error or "interrupted"),
        "finish_result": finish,
        "finish_status": (finish or {}).get("status"),
        "summary": (finish or {}).get("summary"),
        "solved": solved,
        "turns": result.turns if result is not None else 0,
        "usage": result.usage.to_dict() if result is not None else None,
        "wall_time_s": round(time.time() - started, 3),
        "episode": str(episode) if episode else None,
        "recipe": str(recipe_path) if recipe_path else None,
        "error": error or (result.error if result is not None else None),
    }
    write_json(output_dir / "result.json", summary)
    if recipe_path is not None and toolkit is not None and toolkit.memory is not None:
        try:
            published = publish_to_memory(
                toolkit.memory, output_dir, [recipe_path, output_dir / "result.json", output_dir / "steps.jsonl"],
                run_id_for(config.robot, started),
            )
        except Exception:
            log.exception("publishing to memory failed")
    log.info(
        "run ended: status=%s finish=%s solved=%s turns=%s wall=%.1fs%s",
        status, summary["finish_status"], solved, summary["turns"], summary["wall_time_s"],
        f" published={published}" if published else "",
    )
    if interrupted:
        return EXIT_INTERRUPTED
    ok = result is not None and result.status is PlannerStatus.FINISHED and summary["finish_status"] == "success"
    return EXIT_OK if ok and solved is not False else EXIT_FAILED


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def default_output_dir(robot: str) -> Path:
    return Path("runs") / f"{robot}-{time.strftime('%Y%m%d-%H%M%S')}"
