"""StepRecord: one step of a run, a tool call as its record keeps it. steps.jsonl's line is written
from it (`line()`, by rpent.record.steps.StepLog).

A step after which the toolkit observed the robot (`Toolkit._capture_observation`) is an
*observation step*: it also holds what was observed and the action's own time, and it is the step
later calls refer to: a read-only tool that analyses the scene that step observed (LIBERO's
`segment`) saves its artifacts on it, named after it, instead of under its own call id. Step 0
(`start_step()`) is the scene as the run found it, before any action.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The status word of a call a cancel stopped (rpent.tools.result.call_status says which word when).
CANCELLED = "cancelled"
#: The fields a line takes as they are, in the line's order (then duration_s, status, cancelled ...).
_AS_THEY_ARE = ("call_id", "tool", "arguments", "result", "error", "images", "started_at", "ended_at")


@dataclass
class StepRecord:
    """One tool call: what was asked, what came back and how it ended; for an observation step also
    what was observed after the action, and what was saved on the step afterwards."""

    call_id: int
    tool: str
    #: As validated; the raw input for a call refused before it ran.
    arguments: Any = None
    #: The model-facing text of the result.
    result: str = ""
    error: str | None = None
    #: The call's own image files, names under images/.
    images: list[str] = field(default_factory=list)
    started_at: float = 0.0
    ended_at: float = 0.0
    #: ok, failed, cancelled or error (rpent.tools.result.call_status).
    status: str = "ok"
    outcome: dict[str, bool] = field(default_factory=dict)
    approvals: list[dict[str, Any]] = field(default_factory=list)
    #: What `_capture_observation` returned after the action (None: not an observation step). Not on
    #: the line: the result text the model read already holds it.
    observation: dict[str, Any] | None = None
    #: The action's own time, as `_capture_observation` was told it.
    elapsed_s: float | None = None
    #: Files later calls saved on this step (names under images/), in the order they were saved.
    artifacts: list[str] = field(default_factory=list)

    @property
    def cancelled(self) -> bool:
        """True for a call a cancel stopped (its error then says so), never beside error None."""
        return self.status == CANCELLED

    @property
    def duration_s(self) -> float:
        return round(self.ended_at - self.started_at, 6)

    def line(self) -> dict[str, Any]:
        """The fields of its steps.jsonl line, in the line's order (StepLog puts `segment` first)."""
        fields = {name: getattr(self, name) for name in _AS_THEY_ARE}
        return {**fields, "duration_s": self.duration_s, "status": self.status, "cancelled": self.cancelled,
                "outcome": self.outcome, "approvals": self.approvals}


def start_step() -> StepRecord:
    """Step 0: the scene before the first action (what a scene analysis before any motion is saved on)."""
    return StepRecord(call_id=0, tool="start", observation={})
