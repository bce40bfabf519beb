"""What a toolkit writes down about its calls: steps.jsonl lines, dashboard events, the episode video
and per-action clips, saved images. None of it may break or slow the robot loop: every write here
swallows and logs its own failure."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rpent.record.images import image_labels, save_images
from rpent.record.segments import Segment
from rpent.record.step_record import StepRecord, start_step
from rpent.record.steps import StepLog
from rpent.record.values import describe_exception
from rpent.record.video import VideoRecorder
from rpent.tools.events import DashboardEventSink
from rpent.tools.result import ToolResult, call_status, describe_call

if TYPE_CHECKING:  # annotations only: ToolCall itself refers back to the Toolkit
    from rpent.tools.call import ToolCall

log = logging.getLogger("rpent.tools.toolkit")  # one logger for the toolkit's whole story in run.log


class CallRecord:
    """The record of one toolkit: files under `output_dir` (when given) and events to `dashboard_events`."""

    def __init__(self, output_dir: Path | None, segment: Segment | None,
                 dashboard_events: DashboardEventSink | None) -> None:
        self.output_dir = output_dir
        self.segment = segment
        self.dashboard_events = dashboard_events
        self.events_on = dashboard_events is not None and bool(getattr(dashboard_events, "enabled", True))
        self.recorder: VideoRecorder | None = None
        self.steps: StepLog | None = None
        if output_dir is not None and segment is not None:
            # Per-action clips serve the dashboard; a sink that only logs says clips = False.
            clips = self.events_on and bool(getattr(dashboard_events, "clips", True))
            self.recorder = VideoRecorder(output_dir, clips=clips, segment=segment.number)
            self.steps = StepLog(output_dir / "steps.jsonl", segment=segment.number)
        #: The latest observation step (start_step() before any): what a scene analysis is saved on.
        self.last_step: StepRecord = start_step()
        self._observed: dict[int, StepRecord] = {}  # observation steps whose line is not written yet

    @property
    def on(self) -> bool:
        """Whether a call's timing and arguments are wanted at all (steps.jsonl or the dashboard)."""
        return self.events_on or self.steps is not None

    def close(self) -> Path | None:
        """Save the episode video and close steps.jsonl; the episode's path, if one was filmed."""
        episode = self.recorder.close() if self.recorder is not None else None
        if self.steps is not None:
            self.steps.close()
        self.publish("toolkit_closed", {"episode": str(episode) if episode else None})
        return episode

    def episode_if_any(self) -> Path | None:
        if self.recorder is not None and self.recorder.episode_path.exists():
            return self.recorder.episode_path
        return None

    def record_frame(self, call: ToolCall, clip: str, rgb: np.ndarray | Mapping[str, np.ndarray]) -> None:
        assert self.recorder is not None
        call.frames += 1
        self.recorder.add(rgb, clip=clip)

    def observed(self, call: ToolCall, observation: dict[str, Any], elapsed_s: float) -> None:
        """Save what `_capture_observation` returned after the call's action as its StepRecord: the
        call becomes the record's last_step, and its steps.jsonl line is written from that record."""
        step = StepRecord(call_id=call.id, tool=call.name, observation=observation, elapsed_s=elapsed_s)
        if self.on:
            self._observed[call.id] = step
        self.last_step = step

    def save_images(self, call: ToolCall, result: ToolResult) -> list[str]:
        """images/<call>_<tool>_<camera>.png for each image (rpent.record.images); the images of a
        result naming a `source_step` are saved on that step instead, beside its own pictures."""
        assert self.segment is not None
        source = result.source_step
        if source is None:
            paths = save_images(self.segment, call.id, call.name, result.images, result.image_names)
            return [str(p) for p in paths]
        paths = save_images(self.segment, source.call_id, source.tool, result.images, result.image_names, by=call.name)
        source.artifacts.extend(p.name for p in paths)
        return [str(p) for p in paths]

    def after_run(self, call: ToolCall, result: ToolResult, started: float, ended: float, arguments: Any,
                  clip: str, text: str | None, *, refused: bool = False) -> None:
        """Write the step record and tell the dashboard (only when either is on); never raises. `refused`: the
        call never ran (its tool_finished says so, and the console's progress line leaves it to the
        refusal's own warning)."""
        self.log_step(call, result, started, ended, arguments, text)
        if not self.events_on:
            return
        try:
            clip_path = None
            if call.frames and self.recorder is not None and self.recorder.clips:
                self.recorder.end_clip(clip)
                clip_path = self.recorder.clip_path(clip)
            self.publish(
                "tool_finished",
                {
                    "call_id": call.id,
                    "tool": call.name,
                    "arguments": arguments,
                    "duration_s": ended - started,
                    "error": result.error,
                    # How it ended, in the words every console and page uses (rpent.tools.result.describe_call).
                    "status": call_status(result.error, result.unmet),
                    "status_text": describe_call(result.error, result.unmet),
                    "outcome": result.outcome,
                    "approvals": call.approvals,
                    "result": result.to_dict(),
                    "images": result.image_paths,
                    "image_names": image_labels(result.image_names, len(result.image_paths)),
                    "clip": str(clip_path) if clip_path else None,
                    "refused": refused,
                },
            )
        except Exception:  # the step is logged; the dashboard must never break the robot loop
            log.exception("dashboard update after call %d (%s) failed", call.id, call.name)

    def log_step(
        self,
        call: ToolCall,
        result: ToolResult,
        started: float,
        ended: float,
        arguments: Any = None,
        text: str | None = None,
    ) -> None:
        """Complete the call's StepRecord and append its line to steps.jsonl; never raises (StepLog
        writes what it can encode)."""
        step = self._observed.pop(call.id, None) or StepRecord(call_id=call.id, tool=call.name)
        if self.steps is None:
            return
        try:
            # Validated arguments as JSON; the raw input for a call refused before it ran.
            step.arguments = arguments if arguments is not None else call.arguments
            step.result = text if text is not None else result.to_text()
            step.error = result.error
            step.images = [Path(p).name for p in result.image_paths]
            step.started_at, step.ended_at = started, ended
            step.status = call_status(result.error, result.unmet)
            step.outcome, step.approvals = result.outcome, call.approvals
        except Exception as exc:
            fields = {"call_id": call.id, "tool": call.name, "started_at": started, "ended_at": ended, "error": result.error}
            self.steps.append_reduced(fields, f"the record could not be assembled: {describe_exception(exc)}")
            return
        self.steps.append(step)

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        if not self.events_on:
            return
        try:
            assert self.dashboard_events is not None
            self.dashboard_events.publish(kind, payload)
        except Exception:  # the dashboard must never break the robot loop
            log.exception("dashboard event %s failed", kind)
