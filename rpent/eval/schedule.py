"""Run a sweep's episodes as Ray tasks: declared resources, bounded concurrency, retries, the token budget.

Retries are Ray's own: a task whose worker process dies (crash, OOM kill, `kill -9`) is run again
up to `retries` times, and the retry sets the dead attempt's partial record aside before it starts.
Application errors (a refused configuration) are not retried: they would fail the same way again.

Paths are the driver's: the sweep's are absolute by the time it gets here (Sweep.with_paths_from),
and each task carries its recipe's text and the driver's folder, for workers in other folders or on
other machines. Each running episode holds a slot, and with it a block of the sweep's simulator
addresses no other running episode has.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rpent.eval.cluster import ray_cluster
from rpent.eval.episode import run_args, run_episode
from rpent.eval.progress import Progress
from rpent.eval.records import claim_sweep_folder, clear_failure, read_result, record_dir, strip_ansi, write_failure
from rpent.eval.sweep import Episode, Sweep, SweepError
from rpent.robot import ConfigError

log = logging.getLogger("rpent.eval")
POLL_S = 1.0
HEARTBEAT_S = 15.0


@dataclass
class SweepOutcome:
    ran: list[str] = field(default_factory=list)
    skipped_complete: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    not_run: list[str] = field(default_factory=list)  # the token budget was spent first
    tokens_used: int = 0


def tokens_of(result: dict[str, Any] | None) -> int:
    usage = (result or {}).get("usage") or {}
    return int(usage.get("total_tokens") or 0)


def check_episodes(sweep: Sweep, out: Path) -> None:
    """Refuse a sweep whose episodes the robot or planner would refuse, before Ray starts."""
    from rpent.runner.run import make_planner

    sweep.check_recipes()
    checked_planners: set[str | None] = set()
    for episode in sweep.episodes():
        args, spec, _ = run_args(sweep, episode, out)
        try:
            spec.parse_config(args)
            if args.recipe not in checked_planners:
                make_planner(args, spec)
                checked_planners.add(args.recipe)
        except ConfigError as exc:
            raise SweepError(f"episode {episode.id}: {exc}") from None


def run_sweep(sweep: Sweep, out: Path, *, ray_address: str | None = None, num_cpus: int | None = None,
              progress: Progress | None = None, ray_temp_dir: Path | None = None) -> SweepOutcome:
    check_episodes(sweep, out)
    claim_sweep_folder(out, sweep)
    outcome = SweepOutcome()
    pending: list[Episode] = []
    solved_before = 0
    for episode in sweep.episodes():
        result = read_result(record_dir(out, episode))
        if result is None:
            pending.append(episode)
        else:
            outcome.skipped_complete.append(episode.id)
            outcome.tokens_used += tokens_of(result)
            solved_before += bool(result.get("solved"))
    progress = progress or Progress(len(sweep.episodes()), concurrency=sweep.concurrency)
    progress.done, progress.solved = len(outcome.skipped_complete), solved_before
    if pending and _budget_spent(sweep, outcome):  # a resumed sweep that had spent its budget
        outcome.not_run.extend(e.id for e in pending)
        progress.episodes_skipped(len(pending))
        pending = []
    if not pending:
        progress.show()
        return outcome
    with ray_cluster(ray_address, num_cpus=num_cpus, temp_dir=ray_temp_dir):
        _drive(sweep, out, pending, outcome, progress)
    return outcome


def _budget_spent(sweep: Sweep, outcome: SweepOutcome) -> bool:
    return sweep.token_budget is not None and outcome.tokens_used >= sweep.token_budget


def _drive(sweep: Sweep, out: Path, pending: list[Episode], outcome: SweepOutcome, progress: Progress) -> None:
    import ray
    from ray.exceptions import RayError, RayTaskError, TaskCancelledError

    # max_calls=1: a fresh worker per episode, no threads, handlers or GL contexts left by the last one.
    task = ray.remote(max_calls=1)(run_episode).options(
        num_cpus=sweep.cpus_per_episode,
        memory=sweep.memory_per_episode_mb * 2**20,
        num_gpus=sweep.gpus_per_episode,
        max_retries=sweep.retries,
        retry_exceptions=False,
        name="rpent-eval-episode",
    )
    sweep_data, out_str, here = sweep.model_dump(), str(out), str(Path.cwd())
    queue = list(pending)
    # Each running episode holds one block of the simulators' loopback addresses, its slot's.
    free_slots = list(range(sweep.concurrency))
    blocks = sweep.sim_host_blocks()
    in_flight: dict[Any, tuple[Episode, int]] = {}
    since_heartbeat = 0.0
    try:
        while queue or in_flight:
            while queue and free_slots and not _budget_spent(sweep, outcome):
                episode, slot = queue.pop(0), free_slots.pop(0)
                clear_failure(out, episode)
                ref = task.remote(sweep_data, episode.fields(), out_str, sim_hosts=blocks[slot],
                                  recipe_text=recipe_text(sweep, episode), driver_folder=here)
                in_flight[ref] = (episode, slot)
                progress.episode_started()
                progress.show()
            if queue and _budget_spent(sweep, outcome):
                outcome.not_run.extend(e.id for e in queue)
                progress.episodes_skipped(len(queue))
                log.warning("token budget %d spent (%d used): %d episodes not started",
                            sweep.token_budget, outcome.tokens_used, len(queue))
                queue.clear()
                progress.show()
            if not in_flight:
                break
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=POLL_S)
            since_heartbeat += POLL_S if not ready else 0.0
            for ref in ready:
                episode, slot = in_flight.pop(ref)
                free_slots.append(slot)
                try:
                    result = ray.get(ref)
                except RayTaskError as exc:  # the episode raised: its own one line (rpent.eval.episode)
                    _failed(out, episode, _first_line(exc.cause or exc), outcome, progress)
                except (RayError, TaskCancelledError) as exc:  # the worker died, every attempt
                    reason = f"{type(exc).__name__} after {sweep.retries + 1} attempt(s): {_first_line(exc)}"
                    _failed(out, episode, reason, outcome, progress)
                else:
                    outcome.ran.append(episode.id)
                    outcome.tokens_used += tokens_of(result)
                    progress.episode_finished(bool(result.get("solved")))
                progress.show()
            if since_heartbeat >= HEARTBEAT_S:
                since_heartbeat = 0.0
                progress.show()
    except BaseException:
        for ref in in_flight:  # the records of these stay incomplete: a rerun retries them
            ray.cancel(ref, force=True)
        raise


def _failed(out: Path, episode: Episode, reason: str, outcome: SweepOutcome, progress: Progress) -> None:
    log.error("episode %s failed: %s", episode.id, reason.removeprefix(f"episode {episode.id}: "))
    write_failure(out, episode, reason)
    outcome.failed[episode.id] = reason
    progress.episode_failed()


def _first_line(exc: BaseException) -> str:
    text = strip_ansi(str(exc)).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def recipe_text(sweep: Sweep, episode: Episode) -> str | None:
    """The episode's recipe as the driver reads it, shipped with the task: a worker on a node
    without that file (or with another version of it) replays this copy."""
    path = sweep.recipe_for(episode)
    if sweep.planner != "replay" or path is None:
        return None
    try:
        return path.read_text()
    except OSError as exc:
        raise SweepError(f"recipe: cannot read {path} for episode {episode.id} ({exc.strerror})") from None
