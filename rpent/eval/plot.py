"""Success per task with its Wilson 95% interval, as a PNG (matplotlib's Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_success(per_task: list[dict[str, Any]], labels: list[str], path: Path) -> Path:
    """One bar per task (`labels[i]` names `per_task[i]`), with its interval and successes/episodes."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure  # a bare Figure: no pyplot state shared with a caller

    rates = [r["success_rate"] or 0.0 for r in per_task]
    below = [max(0.0, rate - r["wilson95_low"]) for rate, r in zip(rates, per_task, strict=True)]
    above = [max(0.0, r["wilson95_high"] - rate) for rate, r in zip(rates, per_task, strict=True)]
    figure = Figure(figsize=(max(4.0, 0.6 * len(labels) + 2), 4.0), dpi=100)
    axes = figure.add_subplot()
    positions = list(range(len(labels)))
    axes.bar(positions, rates, color="#4878a8", yerr=[below, above], capsize=4, ecolor="#333333")
    axes.set_xticks(positions, labels, rotation=45, ha="right", fontsize=8)
    axes.set_ylim(0, 1.12)
    axes.set_ylabel("success rate (Wilson 95% interval)")
    axes.set_title("success per task")
    for x, r in zip(positions, per_task, strict=True):
        axes.annotate(f"{r['successes']}/{r['episodes']}", (x, 1.04), ha="center", fontsize=7)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path
