"""The Toolkit executor: a robot's tools, their validation, running a call once it is admitted (its life
from queue to settlement is rpent.tools.lifecycle's), observation capture and the run record."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from rpent.memory.manager import MemoryManager
from rpent.record.atomic import append_json_line, write_text_atomic
from rpent.record.segments import Segment, attach_segment
from rpent.record.values import describe_exception
from rpent.tools.api import StageCallback
from rpent.tools.call import ToolCall
from rpent.tools.call_record import CallRecord
from rpent.tools.call_values import arguments_mapping, as_result, outcome_of, recipe_entry, recipe_line
from rpent.tools.context import ToolCancelled, ToolContext
from rpent.tools.events import DashboardEventSink
from rpent.tools.lifecycle import CallLifecycle
from rpent.tools.result import CANCELLED_PREFIX, FINISH_MARKER, ToolResult
from rpent.tools.stop_latch import EVENTS_FILE_NAME as STOP_EVENTS_FILE
from rpent.tools.stop_latch import FILE_NAME as STOP_LATCH_FILE
from rpent.tools.stop_latch import StopLatch
from rpent.tools.tool import Tool, ToolArgumentError

log = logging.getLogger(__name__)

_RECIPE_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Command:
    """What `_capture_observation` is told about the action it follows."""

    name: str
    arguments: dict[str, Any]
    #: The call's id: results show it, and images are saved under it (images/<call_id:05d>_<tool>_<camera>.png).
    call_id: int = 0


class Toolkit:
    """Runs tool calls for one robot: thread-safe, synchronous, never raising to the caller. In this
    process, it is the ToolkitAPI (rpent.tools.api) that planners, MCP and TaskRun use.

    Scheduling: calls are exclusive by default; read-only calls run together; a queued exclusive
    call goes before read-only calls that arrived after it, and exclusive calls keep arrival order.
    """

    #: Robot toolkits list their tools here (or pass `tools=`).
    tools: Sequence[Tool] = ()

    def __init__(
        self,
        *,
        robot: Any = None,
        state: dict[str, Any] | None = None,
        memory: MemoryManager | None = None,
        output_dir: str | Path | None = None,
        tools: Sequence[Tool] | None = None,
        dashboard_events: DashboardEventSink | None = None,
        stop_latch: StopLatch | None = None,
    ) -> None:
        from rpent.tools.common_tools import COMMON_TOOLS  # common tools are Tools themselves

        self.robot = robot
        self.state: dict[str, Any] = {} if state is None else state
        self.memory = memory
        self.output_dir = Path(output_dir) if output_dir is not None else None
        self.dashboard_events = dashboard_events

        robot_tools = list(self.tools if tools is None else tools)
        self._tools: dict[str, Tool] = {}
        for item in [*robot_tools, *COMMON_TOOLS]:
            if not isinstance(item, Tool):
                raise TypeError(f"tools: {item!r} is not a Tool (decorate it with @tool)")
            if item.name in self._tools:
                raise ValueError(f"tools: two tools are named '{item.name}'")
            self._tools[item.name] = item
        self._common = frozenset(t.name for t in COMMON_TOOLS)
        # A toolkit that does not override the capture hook has nothing to observe: skip the stage.
        self._observes = type(self)._capture_observation is not Toolkit._capture_observation

        self._calls = CallLifecycle(on_refused=self._log_refusal)
        self._finish_result: dict[str, Any] | None = None
        self._recipe: list[tuple[str, BaseModel, dict[str, bool]]] = []
        self._approvals: list[dict[str, Any]] = []
        self._acting: dict[int, str] = {}  # robot calls running now (acting_calls)

        #: This toolkit's part of the record: never another run's directory (see rpent.record.segments).
        self.segment: Segment | None = None
        if self.output_dir is not None:
            self.segment = attach_segment(self.output_dir)  # RecordError: a used directory, or a file
        self._record = CallRecord(self.output_dir, self.segment, dashboard_events)
        self._stop_events: list[dict[str, Any]] = []
        self._stops_made: dict[int, dict[str, Any]] = {}  # the model's stop calls, latched before they queued
        #: The latched stop (rpent.tools.stop_latch): the robot's (robot_latch) when the caller gives it,
        #: copied into the run record.
        self.stop_latch = stop_latch if stop_latch is not None else StopLatch()
        self._follow_latch()

    # ---- public API -------------------------------------------------------------------------

    def list_tools(self, include_read_image: bool = True) -> list[Tool]:
        return [t for t in self._tools.values() if include_read_image or t.name != "read_image"]

    def get_tool(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def execute_tool(self, name: str, arguments: Mapping[str, Any] | str | None = None) -> ToolResult:
        """Run one call in the caller's thread once the scheduler admits it; never raises.

        Every call leaves one line in steps.jsonl (when there is an output directory), whatever its
        name and arguments: enqueueing and running finish the call themselves when anything fails.
        """
        try:
            call = self._enqueue(name, arguments, None)
            if not call.done():
                self._calls.run(call, self._execute)
            return call.result()
        except Exception as exc:  # the contract: a ToolResult, whatever happened
            log.exception("internal error executing %r", name)
            return ToolResult(error=f"internal error: {describe_exception(exc)}")

    def submit(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None = None,
        *,
        on_stage: StageCallback | None = None,
    ) -> ToolCall:
        """Queue a call now (its place in line is fixed here) and run it on a worker thread."""
        call = self._enqueue(name, arguments, on_stage, waited_on=True)
        if not call.done():
            threading.Thread(target=self._calls.run, args=(call, self._execute), name=f"rpent-call-{call.id}",
                             daemon=True).start()
        return call

    def cancel(self, call_id: int, reason: str = "cancelled") -> bool:
        return self._calls.cancel_by_id(call_id, reason)

    def cancel_active_and_wait(self, timeout: float | None = None, reason: str = "cancelled by operator") -> bool:
        """Stop admitting calls, cancel queued and running ones, and wait for their cleanup.

        Returns False if running calls had not finished within `timeout`. Call `resume_calls()`
        to admit calls again.
        """
        return self._calls.cancel_all_and_wait(timeout, reason)

    def resume_calls(self) -> None:
        self._calls.resume()

    def use_stop_latch(self, latch: StopLatch) -> None:
        """Obey `latch` (one that outlives this toolkit: the robot's, robot_latch), kept in this toolkit's
        record from now on."""
        self.stop_latch.unwatch(self._latched_elsewhere)
        self.stop_latch = latch
        self._follow_latch()

    def _follow_latch(self) -> None:
        self.stop_latch.record_into(self.segment.file(STOP_LATCH_FILE) if self.segment is not None else None)
        self.stop_latch.watch(self._latched_elsewhere)

    def stop(self, by: str, reason: str = "") -> dict[str, Any]:
        """Latch the stop: every motion queued or running is cancelled now (its robot stops as a cancel
        stops it), and every motion after is refused with the latch's line until `release_stop`.
        Read-only calls go on. `by` names who stopped it (an interface, an enclave, a person); the event."""
        event = self.stop_latch.trigger(by, reason)
        self._stop_everything(event)
        self._record_stop_event(event)
        return event

    def _latched_elsewhere(self, event: dict[str, Any]) -> None:
        """Another process wrote the robot's latch (`rpent stop`): act on it as on a stop of our own."""
        if event["event"] == "stop":
            self._stop_everything(event)
        self._record_stop_event(event)

    def _stop_everything(self, event: dict[str, Any]) -> None:
        event["cancelled_calls"] = self._calls.cancel_exclusive(event["line"])
        try:
            # Also what moves outside a call of this toolkit (another client of the same arm): hold it.
            event["halted"] = self._halt_robot()
        except Exception as exc:  # the latch holds all the same; say which device did not take the stop
            log.error("stop latched, but halting the robot failed: %s", describe_exception(exc))
            event["halt_error"] = describe_exception(exc)

    def release_stop(self, by: str) -> dict[str, Any] | None:
        """Release the latch (the operator's interfaces only: no tool calls this); the event, or None
        when it did not hold."""
        event = self.stop_latch.release(by)
        if event is not None:
            self._record_stop_event(event)
        return event

    def stop_events(self) -> list[dict[str, Any]]:
        """Every stop and release of this toolkit, in order (result.json keeps them)."""
        return list(self._stop_events)

    def stop_record(self) -> dict[str, Any]:
        """What result.json keeps of the latched stop: this toolkit's stops and releases, and the latch now."""
        return {"stop_events": self.stop_events(), "stop_latch": self.stop_latch.describe()}

    def _record_stop_event(self, event: dict[str, Any]) -> None:
        self._stop_events.append(event)
        if self.segment is not None:
            append_json_line(self.segment.file(STOP_EVENTS_FILE), event)
        self._record.publish("stop_latch", event)

    @property
    def finish_result(self) -> dict[str, Any] | None:
        return self._finish_result

    def solved(self) -> bool | None:
        """The environment's own verdict on the task; None where the robot cannot tell."""
        return None

    def scene_state(self) -> dict[str, Any] | None:
        """Ground truth of the scene for the run record (e.g. object poses at the start and now);
        None where the robot has none. Never shown to a planner."""
        return None

    def write_recipe(self, recipe_tag: str) -> Path:
        """Write the successful robot calls, in completion order, as `recipe_<tag>.jsonl` (atomically;
        `recipe_<tag>-N.jsonl` in a resumed segment N)."""
        if not _RECIPE_TAG.match(recipe_tag or ""):
            raise ValueError(f"recipe_tag: must match {_RECIPE_TAG.pattern}, got {recipe_tag!r}")
        if self.segment is None:
            raise ValueError("write_recipe: this toolkit has no output_dir")
        lines = [recipe_line(entry) for entry in self.recipe()]
        path = self.segment.file(f"recipe_{recipe_tag}.jsonl")
        write_text_atomic(path, "".join(line + "\n" for line in lines))
        return path

    def recipe(self) -> list[dict[str, Any]]:
        """The successful robot calls so far, in completion order: {"tool", "arguments"} each."""
        return [recipe_entry(name, model.model_dump(mode="json"), outcome) for name, model, outcome in list(self._recipe)]

    def close(self, timeout: float | None = None) -> Path | None:
        """Refuse new calls for good, let queued and running ones finish, then save the episode video."""
        if not self._calls.close(timeout):
            return self._record.episode_if_any()
        self.stop_latch.unwatch(self._latched_elsewhere)
        episode = self._record.close()
        self._on_close()
        return episode

    @property
    def closed(self) -> bool:
        return self._calls.closed

    # ---- for robot toolkits -----------------------------------------------------------------

    def _capture_observation(
        self, *, command: Command, result: ToolResult, elapsed_s: float
    ) -> tuple[dict[str, Any], list[bytes] | dict[str, bytes]]:
        """Observe the robot after a non-readonly robot tool; the base toolkit keeps the action's data.

        Images: PNGs, or {camera name: PNG} so that their files are named by camera."""
        return result.data, []

    def _halt_robot(self) -> Any:
        """Hook for robot toolkits: stop every device now and hold (a latched stop's last step); what was
        stopped. Raises naming any device that did not take the stop."""
        return None

    def _on_close(self) -> None:
        """Hook for robot toolkits (e.g. release per-run resources); the runtime is stopped elsewhere."""

    def _on_acting(self) -> None:
        """Hook for robot toolkits: a call that may move the robot starts now (it is in acting_calls);
        runs on that call's thread before its tool does."""

    # ---- internals --------------------------------------------------------------------------

    def _enqueue(
        self,
        name: str,
        arguments: Mapping[str, Any] | str | None,
        on_stage: StageCallback | None,
        *,
        waited_on: bool = False,
    ) -> ToolCall:
        call = self._calls.new(name, arguments, on_stage, waited_on=waited_on)
        try:
            self._validate_and_queue(call, name, arguments)
        except Exception as exc:  # e.g. a Mapping that fails when read; the call still ends, and is logged
            log.exception("call %d (%r) could not be queued", call.id, name)
            self._calls.abandon(call, f"internal error while checking the call: {describe_exception(exc)}")
        return call

    def _validate_and_queue(self, call: ToolCall, name: str, arguments: Mapping[str, Any] | str | None) -> None:
        if not isinstance(name, str):
            self._calls.refuse(call, f"tool name must be a string, got {type(name).__name__}")
            return
        tool = self._tools.get(name)
        if tool is None:
            self._calls.refuse(call, f"unknown tool '{name}' (available: {', '.join(self._tools)})")
            return
        call.tool = tool
        call.exclusive = not tool.readonly
        if self._latched_out(call):
            return
        try:
            call.model = tool.validate(arguments if type(arguments) is dict else arguments_mapping(arguments, name))
        except ToolArgumentError as exc:
            self._calls.refuse(call, str(exc))
            return
        if tool.name == "stop" and tool.name in self._common:
            # The model's stop takes hold now, not when the scheduler admits it: a motion running (a
            # parallel tool call, another interface's goal) would otherwise hold it up until it ends.
            self._stops_made[call.id] = self.stop("the model", call.model.reason)
        self._calls.queue(call)

    def _latched_out(self, call: ToolCall) -> bool:
        """Refuse a call that the stop latch holds back; True if it did."""
        if not self._held_by_latch(call):
            return False
        self._calls.refuse(call, self.stop_latch.line())
        return True

    def _held_by_latch(self, call: ToolCall) -> bool:
        """A robot call that may move, while the stop latch holds (read-only and common tools go on)."""
        return call.exclusive and call.name not in self._common and self.stop_latch.latched

    def _log_refusal(self, call: ToolCall, result: ToolResult) -> None:
        now = time.time()
        # The dashboard's timeline shows it as steps.jsonl does (the input as given: it never validated), so
        # an operator sees why the planner tries again. It never ran: no tool_started, no clip.
        self._record.after_run(call, result, now, now, call.arguments, "", None, refused=True)

    def acting_calls(self) -> list[tuple[int, str]]:
        """(call id, tool) of every call that may move the robot (not read-only) running now, by id."""
        return sorted(self._acting.items())

    def _execute(self, call: ToolCall) -> ToolResult:
        """Run an admitted call (in its own thread, for CallLifecycle.run); never raises."""
        acting = call.tool is not None and not call.tool.readonly and call.name not in self._common
        try:
            if acting:
                self._acting[call.id] = call.name
                self._on_acting()
            return self._run(call)
        except Exception as exc:  # defensive: _run catches handler errors and logs the step itself
            log.exception("call %d (%s) failed inside the executor", call.id, call.name)
            result = ToolResult(error=f"internal error: {describe_exception(exc)}")
            now = time.time()
            self._record.log_step(call, result, now, now)
            return result
        finally:
            if acting:
                self._acting.pop(call.id, None)

    def _report_stage(self, call: ToolCall, stage: str, message: str = "", progress: float | None = None) -> None:
        call.set_stage(stage, message, progress)
        # The dashboard shows what a running call waits for (e.g. "awaiting_approval").
        self._record.publish("tool_stage", {"call_id": call.id, "tool": call.name, "stage": stage,
                                            "message": message, "progress": progress})

    def _record_approval(self, call: ToolCall, entry: dict[str, Any]) -> None:
        entry = {"call_id": call.id, "tool": call.name, **entry}
        call.approvals.append(entry)
        self._approvals.append(entry)

    def approvals(self) -> list[dict[str, Any]]:
        """Every operator approval asked so far (ToolContext.record_approval), in order."""
        return list(self._approvals)

    def _run(self, call: ToolCall) -> ToolResult:
        tool, model = call.tool, call.model
        assert tool is not None and model is not None
        if self._held_by_latch(call):
            # Latched after this call was queued and before it was admitted: it never starts.
            result = ToolResult(error=self.stop_latch.line())
            self._log_refusal(call, result)
            return result
        record = self._record
        recording = record.on
        started = time.time() if recording else 0.0
        t0 = time.perf_counter()
        call.set_stage("running")
        kwargs = model.__dict__  # handlers get keyword copies; nothing writes to this dict
        arguments_json = model.model_dump(mode="json") if recording else None
        if record.events_on:
            record.publish("tool_started", {"call_id": call.id, "tool": call.name, "arguments": arguments_json})
        clip = f"{call.id:05d}_{call.name}" if record.recorder is not None else ""
        ctx: ToolContext[Any] = ToolContext(
            robot=self.robot,
            state=self.state,
            memory=self.memory,
            output_dir=self.output_dir,
            call_id=call.id,
            tool_name=call.name,
            cancel_token=call.token,
            frame_sink=(lambda rgb: record.record_frame(call, clip, rgb)) if record.recorder is not None else None,
            stage_sink=(lambda *stage: self._report_stage(call, *stage)) if record.events_on else call.set_stage,
            approval_sink=lambda entry: self._record_approval(call, entry),
            last_step=record.last_step,
            stop_sink=lambda reason: self._stops_made.pop(call.id, None) or self.stop("the model", reason),
        )
        try:
            result = as_result(tool.fn(**kwargs, ctx=ctx))
            if tool.outcome and result.error is None:
                result.outcome = outcome_of(result.data, tool.outcome)
        except ToolCancelled as exc:
            result = ToolResult(error=f"cancelled: {exc}")
        except Exception as exc:
            cause = describe_exception(exc)
            # The error is the call's result (the progress line and steps.jsonl show it); the
            # traceback is for run.log, not the operator's terminal.
            log.debug("tool %s raised %s", call.name, cause, exc_info=True)
            result = ToolResult(error=cause)
        elapsed = time.perf_counter() - t0
        try:
            result, text = self._settle(call, tool, model, kwargs, result, elapsed)
        except Exception as exc:  # defensive: the step is still logged, naming what failed
            log.exception("call %d (%s) failed after its handler returned", call.id, call.name)
            result, text = ToolResult(error=f"internal error after the tool ran: {describe_exception(exc)}"), None
        if recording:
            record.after_run(call, result, started, time.time(), arguments_json, clip, text)
        return result

    def _settle(
        self, call: ToolCall, tool: Tool, model: BaseModel, kwargs: dict[str, Any], result: ToolResult, elapsed: float
    ) -> tuple[ToolResult, str]:
        """Observation, finish, images and recipe after the handler; the result with its model-facing text."""
        finish = result.error is None and bool(result.data.get(FINISH_MARKER))
        robot_call = not finish and call.name not in self._common and call.name != "finish"
        if call.cancel_requested and not (result.error or "").startswith(CANCELLED_PREFIX):
            result = _as_cancelled(result, call.cancel_reason)  # before the observation: it settles
        if robot_call and not tool.readonly and self._observes:
            call.set_stage("capturing")
            # run.log then tells a step's motion from its observation (and a video's pauses from losses).
            log.debug("call %d (%s): capturing the observation", call.id, call.name)
            result = self._capture(call, kwargs, result, elapsed)
        if call.cancel_requested and not (result.error or "").startswith(CANCELLED_PREFIX):
            result = _as_cancelled(result, call.cancel_reason)  # a cancel during the observation
        if finish:
            result.data = {k: v for k, v in result.data.items() if k != FINISH_MARKER}
        if call.name == "get_state" and result.error is None:
            # Every robot's state shows the latch: the model and the operator learn why motions are refused.
            result.data = {**result.data, "stop_latch": self.stop_latch.describe()}
        # Whatever a tool returned must reach the model (and transcripts) as JSON: a result that does
        # not encode becomes an error naming why, before it counts as a finish or a recipe step.
        try:
            text = result.to_text()
        except Exception as exc:
            result = ToolResult(error=f"result could not be encoded: {describe_exception(exc)}", images=result.images,
                                image_names=result.image_names, source_step=result.source_step)
            text = result.to_text()
        if finish and result.error is None:
            self._finish_result = dict(result.data)
            self._record.publish("finish", {"call_id": call.id, "finish_result": self._finish_result})
        if result.images and self.output_dir is not None:
            result.image_paths = self._record.save_images(call, result)
        if robot_call and result.error is None:
            # The validated model is kept and dumped only when a recipe is written. list.append is
            # atomic, so concurrent read-only calls need no lock here.
            self._recipe.append((call.name, model, result.outcome))
        return result, text

    def _capture(self, call: ToolCall, kwargs: dict[str, Any], result: ToolResult, elapsed: float) -> ToolResult:
        try:
            data, images = self._capture_observation(
                command=Command(call.name, kwargs, call.id), result=result, elapsed_s=elapsed
            )
        except Exception as exc:
            log.warning("observation after %s failed: %s", call.name, exc, exc_info=True)
            note = f"observation capture failed: {type(exc).__name__}: {exc}"
            return ToolResult(data=result.data, images=result.images, error=f"{result.error}; {note}" if result.error else note,
                              outcome=result.outcome, image_names=result.image_names)
        self._record.observed(call, dict(data), elapsed)  # the step's StepRecord (rpent.record.step_record)
        own = [*result.image_names, *[""] * (len(result.images) - len(result.image_names))][: len(result.images)]
        names = list(images) if isinstance(images, dict) else [""] * len(images)
        pngs = list(images.values()) if isinstance(images, dict) else list(images)
        return ToolResult(data=dict(data), images=[*result.images, *pngs], error=result.error, outcome=result.outcome,
                          image_names=[*own, *names])


def _as_cancelled(result: ToolResult, reason: str) -> ToolResult:
    """A call cancelled while it ran whose handler returned anyway (its action had ended, or the cancel
    came during the observation) or failed for another reason: it reads as cancelled everywhere."""
    if result.error is None:
        error = f"cancelled: {reason} (after its action had run; the result shows where it ended)"
    else:
        error = f"cancelled: {reason}; then: {result.error}"
    return ToolResult(data=result.data, images=result.images, outcome=result.outcome, error=error,
                      image_names=result.image_names, source_step=result.source_step)
