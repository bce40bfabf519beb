"""Replay a recipe: the recorded tool calls of a successful run, through the same toolkit.

Validation, scheduling, observation capture and video all apply, as for a model's calls. The
whole recipe is checked (parses, names known tools) before the first call moves anything.

A step fails when its call returns an error, or when it contradicts what the recipe expects: a
tool's outcome field (`@tool(outcome=...)`: franka's `reached`, `grasped`) reported false where
the recipe expects true. Every outcome field is expected true unless the line's `expect` says
otherwise (`"expect": {"grasped": false}`, which a recorded recipe writes for a call that reported
false when it was recorded). The replay stops at the first failed step (`--continue-on-error`
goes on, and then finishes with status failure): a pick does not go on to lift after a grasp
that closed on nothing.
"""

from __future__ import annotations

import json
import logging
import queue
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rpent.planner.base import AbortRequest, OperatorInput, OperatorMessage, PlannerResult, PlannerStatus, ScriptPlanner
from rpent.tools import ToolArgumentError, ToolResult
from rpent.tools.api import ToolInfo, ToolkitAPI

log = logging.getLogger(__name__)


class RecipeError(ValueError):
    """The recipe file cannot be replayed; the message names the line and the problem."""


def load_recipe(path: str | Path) -> list[dict[str, Any]]:
    """Read a recipe JSONL file: one {"tool": name, "arguments": {...}} object per line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RecipeError(f"--recipe: cannot read {path}: {exc.strerror or exc}") from None
    steps = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RecipeError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("tool"), str):
            raise RecipeError(f"{path}:{number}: each line must be an object with a string 'tool'")
        arguments = entry.get("arguments", {})
        if not isinstance(arguments, dict):
            raise RecipeError(f"{path}:{number}: 'arguments' must be an object")
        expect = entry.get("expect", {})
        if not isinstance(expect, dict) or not all(isinstance(v, bool) for v in expect.values()):
            raise RecipeError(f"{path}:{number}: 'expect' must be an object of result fields and true/false")
        steps.append({"tool": entry["tool"], "arguments": arguments, "expect": expect, "line": number})
    if not steps:
        raise RecipeError(f"{path}: the recipe has no steps")
    return steps


class ReplayPlanner(ScriptPlanner):
    """Runs a recipe's calls in order; stops at the first failed step (module docstring) unless `continue_on_error`.

    A recipe holds no finish call (recipes keep robot calls only), so after the last step the
    replay calls the robot's `finish` tool with status success, if the robot has one.
    """

    name = "replay"

    def __init__(self, *, recipe: str | Path, continue_on_error: bool = False, finish: bool = True) -> None:
        self.recipe_path = Path(recipe)
        self.steps = load_recipe(self.recipe_path)
        self.continue_on_error = continue_on_error
        self.finish = finish

    def check_tools(self, tools: Sequence[ToolInfo]) -> None:
        """Check every step names a tool of this robot with valid arguments, before anything moves.

        `validate` is local both in process (Tool) and over ROS (RosToolkit's RemoteTool checks the
        node's published input schema), so a bad step is refused before the first call is sent.
        """
        by_name = {t.name: t for t in tools}
        for step in self.steps:
            where = f"{self.recipe_path}:{step['line']}"
            found = by_name.get(step["tool"])
            if found is None:
                raise RecipeError(f"{where}: unknown tool {step['tool']!r} for this robot (tools: {', '.join(by_name)})")
            try:
                found.validate(step["arguments"])
            except ToolArgumentError as exc:
                raise RecipeError(f"{where}: {exc}") from None

    def run(self, toolkit: ToolkitAPI, max_turns: int, input_queue: queue.Queue[OperatorInput] | None) -> PlannerResult:
        self.check_tools(toolkit.list_tools())
        known = {t.name for t in toolkit.list_tools()}
        transcript: list[dict[str, Any]] = []
        failures: list[str] = []
        turns = 0
        for index, step in enumerate(self.steps, start=1):
            abort = _pending_abort(input_queue, transcript)
            if abort is not None:
                return self._result(PlannerStatus.ABORTED, f"operator abort before step {index}: {abort}", turns, transcript, toolkit)
            if turns >= max_turns:
                return self._result(PlannerStatus.TURN_LIMIT, f"max_turns={max_turns} reached before step {index}", turns, transcript, toolkit)
            turns += 1
            t0 = time.monotonic()
            result = toolkit.execute_tool(step["tool"], step["arguments"])
            transcript.append(
                {
                    "step": index,
                    "tool": step["tool"],
                    "arguments": step["arguments"],
                    "result": result.to_text(),
                    "images": result.image_paths,
                    "error": result.error,
                    "duration_s": round(time.monotonic() - t0, 4),
                }
            )
            log.debug("replay step %d/%d %s: %s", index, len(self.steps), step["tool"], "error" if result.is_error else "ok")
            failure = _step_failure(index, step, result)
            if failure is not None:
                if not result.is_error:  # an error is on the call's own progress line already
                    log.warning("replay: %s%s", failure, "; going on (--continue-on-error)" if self.continue_on_error else "")
                if not self.continue_on_error:
                    return self._result(PlannerStatus.ERROR, failure, turns, transcript, toolkit, error=failure)
                failures.append(failure)
        if self.finish and "finish" in known and toolkit.finish_result is None:
            summary = f"Replayed {len(self.steps)} steps of {self.recipe_path.name}"
            if failures:
                summary += f" ({len(failures)} failed: {failures[0]})"
            result = toolkit.execute_tool("finish", {"status": "failure" if failures else "success", "summary": summary})
            transcript.append({"step": "finish", "tool": "finish", "result": result.to_text(), "error": result.error})
        if toolkit.finish_result is not None:
            reason = "recipe replayed" + (f" with {len(failures)} failed steps" if failures else "")
            return self._result(PlannerStatus.FINISHED, reason, turns, transcript, toolkit)
        return self._result(PlannerStatus.MODEL_ENDED, "recipe ended without an accepted finish", turns, transcript, toolkit)

    @staticmethod
    def _result(
        status: PlannerStatus,
        reason: str,
        turns: int,
        transcript: list[dict[str, Any]],
        toolkit: ToolkitAPI,
        error: str | None = None,
    ) -> PlannerResult:
        finish = dict(toolkit.finish_result) if toolkit.finish_result is not None else None
        return PlannerResult(status=status, stop_reason=reason, finish_result=finish, turns=turns, transcript=transcript, error=error)


def _step_failure(index: int, step: dict[str, Any], result: ToolResult) -> str | None:
    """Why this step failed (an error, or an outcome the recipe expects true reported false), else None."""
    where = f"step {index} ({step['tool']}, line {step['line']})"
    if result.is_error:
        return f"{where} failed: {result.error}"
    contradicted = [name for name in result.unmet if step["expect"].get(name, True)]
    if contradicted:
        fields = ", ".join(f"{name}=false" for name in contradicted)
        return f"{where} did not do what the recipe expects: the robot reported {fields}"
    return None


def _pending_abort(input_queue: queue.Queue[OperatorInput] | None, transcript: list[dict[str, Any]]) -> str | None:
    """Drain operator input: messages are noted in the transcript (a recipe cannot act on them)."""
    if input_queue is None:
        return None
    while True:
        try:
            item = input_queue.get_nowait()
        except queue.Empty:
            return None
        if isinstance(item, AbortRequest):
            return item.reason or "abort requested"
        if isinstance(item, OperatorMessage):
            transcript.append({"operator_message": item.text, "note": "a recipe replay cannot act on messages"})
