"""results.json, the Markdown table and the plot, rebuilt from a sweep folder's records alone.

One row per planned episode; an episode without a complete record is a row too (finish status
`crashed` or `not_run`), so a sweep's denominator never shrinks silently. Success rates count an
episode as a success when the simulator's own check (`solved`) says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rpent.eval.plot import plot_success
from rpent.eval.records import attempts_of, read_failure, read_result, read_sweep, record_dir
from rpent.eval.sweep import Sweep

RESULTS_FILE = "results.json"
TABLE_FILE = "results.md"
PLOT_FILE = "success.png"
Z_95 = 1.959963984540054  # the two-sided 95% normal quantile


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; (0, 1) when there is nothing to estimate from."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Rate:
    group: dict[str, Any]
    successes: int
    episodes: int

    @property
    def rate(self) -> float | None:
        return self.successes / self.episodes if self.episodes else None

    def to_dict(self) -> dict[str, Any]:
        lo, hi = wilson_interval(self.successes, self.episodes)
        return {**self.group, "successes": self.successes, "episodes": self.episodes, "success_rate": self.rate,
                "wilson95_low": round(lo, 4), "wilson95_high": round(hi, 4)}


def episode_rows(out: Path, sweep: Sweep) -> list[dict[str, Any]]:
    rows = []
    for episode in sweep.episodes():
        record = record_dir(out, episode)
        result = read_result(record)
        failure = read_failure(out, episode)
        if result is not None:
            status, finish, solved = result.get("status"), result.get("finish_status"), result.get("solved")
            error = result.get("error")
        else:
            status = "crashed" if record.exists() or failure else "not_run"
            finish, solved, error = None, None, failure
        rows.append({
            "id": episode.id, "robot": episode.robot, "suite": episode.suite, "task": episode.task,
            "init_state": episode.init_state, "seed": episode.seed, "planner": sweep.planner,
            "repeat": episode.repeat, "status": status, "finish_status": finish, "solved": solved,
            "turns": (result or {}).get("turns"),
            "tokens": ((result or {}).get("usage") or {}).get("total_tokens", 0) if result else None,
            "wall_time_s": (result or {}).get("wall_time_s"),
            "attempts": len(attempts_of(out, episode)) + (1 if result is not None else 0),
            "record": str(record) if record.exists() else None,
            "error": error,
        })
    return rows


def rates(rows: Iterable[dict[str, Any]], keys: tuple[str, ...]) -> list[Rate]:
    """Success per group; an episode that never ran (token budget) is not counted in its group."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        if row["status"] == "not_run":
            continue
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    return [Rate(dict(zip(keys, key, strict=True)), sum(1 for r in members if r["solved"] is True), len(members))
            for key, members in groups.items()]


def task_keys(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    """The per-task grouping: the swept axes other than initial state, seed and repeat."""
    return tuple(k for k in ("robot", "suite", "task") if any(r[k] is not None for r in rows)) or ("robot",)


def suite_keys(rows: list[dict[str, Any]]) -> tuple[str, ...]:
    return ("robot", "suite") if any(r["suite"] is not None for r in rows) else ("robot",)


def summarise(out: Path) -> dict[str, Any]:
    """Write results.json, results.md and success.png into `out`; returns the results."""
    sweep = read_sweep(out)
    rows = episode_rows(out, sweep)
    per_task = [r.to_dict() for r in rates(rows, task_keys(rows))]
    per_suite = [r.to_dict() for r in rates(rows, suite_keys(rows))]
    results = {"sweep": sweep.model_dump(), "episodes": rows, "per_task": per_task, "per_suite": per_suite,
               "tokens": sum(r["tokens"] or 0 for r in rows)}
    (out / RESULTS_FILE).write_text(json.dumps(results, indent=2) + "\n")
    (out / TABLE_FILE).write_text(markdown_table(per_task, per_suite))
    plot_success(per_task, [_label(r) for r in per_task], out / PLOT_FILE)
    return results


def _label(group: dict[str, Any]) -> str:
    parts = [str(group["suite"]) if group.get("suite") else str(group["robot"])]
    if group.get("task") is not None:
        parts.append(f"task {group['task']}")
    return " ".join(parts)


def _rate_cells(rate: dict[str, Any]) -> str:
    if not rate["episodes"]:
        return "- | - | -"
    return (f"{rate['successes']}/{rate['episodes']} | {rate['success_rate']:.0%} | "
            f"{rate['wilson95_low']:.0%}-{rate['wilson95_high']:.0%}")


def markdown_table(per_task: list[dict[str, Any]], per_suite: list[dict[str, Any]]) -> str:
    lines = ["| task | solved | success | Wilson 95% |", "|---|---|---|---|"]
    lines += [f"| {_label(r)} | {_rate_cells(r)} |" for r in per_task]
    lines += ["", "| suite | solved | success | Wilson 95% |", "|---|---|---|---|"]
    lines += [f"| {_label({**r, 'task': None})} | {_rate_cells(r)} |" for r in per_suite]
    return "\n".join(lines) + "\n"
