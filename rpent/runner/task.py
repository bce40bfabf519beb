"""One task against an already started runtime: toolkit, planner, and the run's record.

`rpent run` wraps one TaskRun between runtime start and stop; the dashboard runs many TaskRuns in one
session, reusing the shared runtime components. Either way the record is the same.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from rpent.planner.base import AbortRequest, OperatorInput, OperatorMessage, Planner, PlannerResult, PlannerStatus
from rpent.record.run_record import RunRecord
from rpent.robot import RobotSpec, RunConfig
from rpent.runner.publish import publish_to_memory, qualifies_for_memory, run_id_for
from rpent.tools.api import ToolkitAPI
from rpent.tools.finish import OPERATOR_KEY, OperatorRecord
from rpent.tools.stop_latch import robot_latch

log = logging.getLogger("rpent.run")


class TaskRun:
    """Runs one task to a saved record. `run()` blocks; `abort()`, `send_message()` and `add_note()`
    may be called from other threads while it runs."""

    def __init__(
        self,
        *,
        spec: RobotSpec,
        robot: ModuleType,
        config: RunConfig,
        planner: Planner,
        planner_name: str,
        max_turns: int,
        runtime_kwargs: dict[str, Any],
        events: Any,
        record: RunRecord,
        dashboard_interaction: Any = None,
        run_id: str | None = None,
    ) -> None:
        """`record`: the record this task writes, claimed in config.output_dir by the entry point.
        `run_id`: the run's name (its inbox folder); by default the robot and the task's start time."""
        self.spec = spec
        self.robot = robot
        self.config = config
        self.planner = planner
        self.planner_name = planner_name
        self.max_turns = max_turns
        self.runtime_kwargs = runtime_kwargs
        self.events = events
        self.dashboard_interaction = dashboard_interaction
        self.record = record
        self.run_id = run_id
        self.inputs: queue.Queue[OperatorInput] = queue.Queue()
        #: The robot module's get_toolkit gives it: a Toolkit here, or a RemoteTask on a toolkit node (dashboard_node).
        self.toolkit: ToolkitAPI | None = None
        self.summary: dict[str, Any] | None = None
        self.aborted: str | None = None
        #: The operator's abort and notes; the toolkit's finish tool reports them (rpent.tools.finish).
        self.operator = OperatorRecord()
        self._lock = threading.Lock()

    # ---- operator side ----------------------------------------------------------------------

    def send_message(self, text: str) -> None:
        self.inputs.put(OperatorMessage(text))

    def add_note(self, text: str) -> None:
        self.operator.add_note(text)

    def abort(self, reason: str = "operator abort", timeout: float = 10.0) -> bool:
        """Cancel the active tool call (the robot stops) and end the task with status aborted."""
        with self._lock:
            if self.aborted is None:
                self.aborted = reason
        self.operator.abort(reason)
        self.inputs.put(AbortRequest(reason))
        toolkit = self.toolkit
        if toolkit is None:
            return True
        return toolkit.cancel_active_and_wait(timeout=timeout, reason=reason)

    # ---- the task ---------------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        started = time.time()
        config = self.config
        result: PlannerResult | None = None
        error: str | None = None
        try:
            self.toolkit = self.robot.get_toolkit(runtime_kwargs=self.runtime_kwargs, dashboard_events=self.events, config=config)
            if hasattr(self.toolkit, "use_stop_latch"):  # a toolkit reached over ROS obeys its node's latch
                self.toolkit.use_stop_latch(robot_latch(self.spec.name))
            state = getattr(self.toolkit, "state", None)  # a toolkit reached over ROS keeps its own
            if isinstance(state, dict):
                state[OPERATOR_KEY] = self.operator
            if self.aborted is not None:  # aborted while the toolkit was being built
                self.toolkit.cancel_active_and_wait(timeout=1, reason=self.aborted)
            system_prompt, user_message = self.spec.prompts.render(config.prompt_vars)
            log.info("planning with %s (max %d turns)", self.planner_name, self.max_turns)
            result = self.planner.solve(
                system_prompt=system_prompt,
                user_message=user_message,
                toolkit=self.toolkit,
                max_turns=self.max_turns,
                input_queue=self.inputs,
                dashboard_interaction=self.dashboard_interaction,
            )
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.exception("task failed: %s", error)
        finally:
            self.summary = self._finish(result, error, started)
        return self.summary

    def _finish(self, result: PlannerResult | None, error: str | None, started: float) -> dict[str, Any]:
        """Always: solved(), transcript, finish result with operator fields, recipe, video, result.json."""
        toolkit, record = self.toolkit, self.record
        solved, scene, finish = self._verdict(toolkit)
        recipe_path: Path | None = None
        episode = None
        try:
            with self._lock:
                aborted = self.aborted
            operator = self.operator.fields()
            if finish is not None or aborted is not None or operator["operator_notes"]:
                # The whole record, also what happened after the finish (a late note, an abort).
                finish = {**(finish or {"status": "aborted" if aborted else None, "summary": None}), **operator}
            if result is not None:
                record.write_transcript(result.transcript)
            ok = qualifies_for_memory(finish, solved) and aborted is None and error is None
            if toolkit is not None and ok:
                recipe_path = toolkit.write_recipe(self.config.recipe_tag)
        finally:
            if toolkit is not None:
                try:
                    episode = toolkit.close(timeout=30)
                except Exception:
                    log.exception("closing the toolkit failed")
        summary = self._summary(result, error, started, aborted, finish, solved, episode, recipe_path)
        summary["approvals"] = approval_summary(toolkit)
        if scene is not None:  # robots with ground truth (simulators) only
            summary["scene"] = scene
        disagreement = disagreement_of(summary["finish_status"], solved)
        if disagreement is not None:  # on the console, in run.log, in result.json and on the page
            log.warning("%s", disagreement)
            summary["disagreement"] = disagreement
        record.write_result(summary)
        published = self._publish(recipe_path, started)
        log.info(
            "task ended: status=%s finish=%s solved=%s turns=%s wall=%.1fs%s",
            summary["status"], summary["finish_status"], solved, summary["turns"], summary["wall_time_s"],
            f" published={published}" if published else "",
        )
        return summary

    @staticmethod
    def _verdict(toolkit: ToolkitAPI | None) -> tuple[bool | None, dict[str, Any] | None, dict[str, Any] | None]:
        """The toolkit's own view of the outcome: solved(), the scene's ground truth, the finish result."""
        if toolkit is None:
            return None, None, None
        solved = scene = None
        try:
            solved = toolkit.solved()
        except Exception:
            log.exception("solved() failed")
        try:  # optional: toolkits reached over ROS do not offer it
            scene_state = getattr(toolkit, "scene_state", None)
            scene = scene_state() if scene_state is not None else None
        except Exception:
            log.exception("scene_state() failed")
        finish = dict(toolkit.finish_result) if toolkit.finish_result is not None else None
        return solved, scene, finish

    def _summary(self, result: PlannerResult | None, error: str | None, started: float, aborted: str | None,
                 finish: dict[str, Any] | None, solved: bool | None, episode: Any, recipe_path: Path | None,
                 ) -> dict[str, Any]:
        """result.json: what ran, how it ended and where its record is."""
        config = self.config
        status = "aborted" if aborted is not None else (result.status.value if result is not None else "error")
        return {
            "robot": config.robot,
            "task": config.task,
            "planner": self.planner_name,
            "status": status,
            "stop_reason": aborted if aborted is not None else (result.stop_reason if result is not None else error),
            "finish_result": finish,
            "finish_status": (finish or {}).get("status"),
            "summary": (finish or {}).get("summary"),
            "solved": solved,
            "turns": result.turns if result is not None else 0,
            "usage": result.usage.to_dict() if result is not None else None,
            "wall_time_s": round(time.time() - started, 3),
            "output_dir": str(config.output_dir),
            "segment": self.record.number,
            "episode": str(episode) if episode else None,
            "recipe": str(recipe_path) if recipe_path else None,
            "error": error or (result.error if result is not None else None),
            # Every latched stop and release of the run, and the latch as it ends (rpent.tools.stop_latch):
            # the toolkit's own, or a ROS toolkit node's.
            **(self.toolkit.stop_record() if hasattr(self.toolkit, "stop_record") else {"stop_events": [], "stop_latch": None}),
        }

    def _publish(self, recipe_path: Path | None, started: float) -> Any:
        """A successful run's recipe and record into the robot's memory; what was published, or None."""
        toolkit, record = self.toolkit, self.record
        if recipe_path is None or toolkit is None or toolkit.memory is None:
            return None
        try:
            return publish_to_memory(
                toolkit.memory, [recipe_path, record.result_file, record.steps_file],
                self.run_id or run_id_for(self.config.robot, started),
            )
        except Exception:
            log.exception("publishing to memory failed")
            return None

    @property
    def succeeded(self) -> bool:
        s = self.summary or {}
        return s.get("status") == PlannerStatus.FINISHED.value and s.get("finish_status") == "success" and s.get("solved") is not False


def disagreement_of(finish_status: str | None, solved: bool | None) -> str | None:
    """The warning when the planner's finish and the robot's own check disagree; None when they agree
    or either is unknown."""
    if solved is None or finish_status is None or (finish_status == "success") == bool(solved):
        return None
    return (f"finish={finish_status} but solved()={solved}: the planner's report and the robot's own check "
            f"disagree; check the scene")


def approval_summary(toolkit: ToolkitAPI | None) -> dict[str, Any] | None:
    """result.json's `approvals`: how many motions asked the operator, the answers, who gave them and
    how long they waited (each one is on its call's line in steps.jsonl); None when none was asked."""
    approvals = getattr(toolkit, "approvals", None)  # toolkits reached over ROS do not offer it
    entries = approvals() if approvals is not None else []
    if not entries:
        return None
    outcomes = [entry["outcome"] for entry in entries]
    waits = [entry["waited_s"] for entry in entries]
    return {
        "asked": len(entries),
        **{outcome: outcomes.count(outcome) for outcome in ("approved", "denied", "timed_out", "cancelled")},
        "by": sorted({entry["by"] for entry in entries}),
        "waited_s_total": round(sum(waits), 3),
        "waited_s_max": round(max(waits), 3),
    }
