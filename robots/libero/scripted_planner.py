"""The scripted pick-and-place (scripted.py) as a planner plugin, so whole runs and sweeps can use it:

    rpent run  --robot libero --task-id 3 --planner robots.libero.scripted_planner:ScriptedPickPlacePlanner
    rpent eval --robot libero --tasks 0-9 --planner robots.libero.scripted_planner:ScriptedPickPlacePlanner ...

It sees only what the tools return, like a model would; each tool call counts as one turn.
"""

from __future__ import annotations

import queue
from typing import Any

from robots.libero.scripted import pick_and_place
from rpent.planner.base import OperatorInput, PlannerResult, PlannerStatus, ScriptPlanner
from rpent.tools.api import ToolkitAPI


class ScriptedPickPlacePlanner(ScriptPlanner):
    name = "scripted_pick_place"

    def __init__(self, **_model_options: Any) -> None:
        """Model options (--model, --max-wall-time, ...) mean nothing to a script and are ignored."""

    def run(self, toolkit: ToolkitAPI, max_turns: int, input_queue: queue.Queue[OperatorInput] | None) -> PlannerResult:
        outcome = pick_and_place(toolkit)
        transcript = [{"tool": name, "ok": ok} for name, ok in outcome.calls]
        finish = toolkit.finish_result
        if finish is None:
            return PlannerResult(PlannerStatus.MODEL_ENDED, outcome.note or "the script ended without a finish",
                                 turns=len(outcome.calls), transcript=transcript)
        return PlannerResult(PlannerStatus.FINISHED, "finish accepted", finish_result=dict(finish),
                             turns=len(outcome.calls), transcript=transcript)
