"""What a toolkit writes down about its calls: steps.jsonl lines, dashboard events, the episode video
and per-action clips, saved images. None of it may break or slow the robot loop: every write here
swallows and logs its own failure."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rpent.tools.events import DashboardEventSink
from rpent.tools.images import image_file_name, image_labels
from rpent.tools.record import Segment
from rpent.tools.recording import VideoRecorder
from rpent.tools.result import ToolResult, call_status, describe_call, describe_exception
from rpent.tools.steps import StepLog

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

    def save_images(self, call: ToolCall, images: list[bytes], names: list[str]) -> list[str]:
        """images/<call>_<tool>_<camera>.png for each image (rpent.tools.images.image_labels)."""
        assert self.output_dir is not None and self.segment is not None
        folder = self.output_dir / "images"
        folder.mkdir(exist_ok=True)
        paths = []
        for png, label in zip(images, image_labels(names, len(images)), strict=True):
            # Call ids restart with each segment; the segment suffix keeps every name unique in the record.
            path = folder / self.segment.name(image_file_name(call.id, call.name, label))
            path.write_bytes(png)
            paths.append(str(path))
        return paths

    def after_run(self, call: ToolCall, result: ToolResult, started: float, ended: float, arguments: Any,
                  clip: str, text: str | None) -> None:
        """Write the step record and tell the dashboard (only when either is on); never raises."""
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
        """Append the call's line to steps.jsonl; never raises (StepLog writes what it can encode)."""
        if self.steps is None:
            return
        try:
            status = call_status(result.error, result.unmet)
            record = {
                "call_id": call.id,
                "tool": call.name,
                # Validated arguments as JSON; the raw input for a call refused before it ran.
                "arguments": arguments if arguments is not None else call.arguments,
                "result": text if text is not None else result.to_text(),
                "error": result.error,
                "images": [Path(p).name for p in result.image_paths],
                "started_at": started,
                "ended_at": ended,
                "duration_s": round(ended - started, 6),
                "status": status,
                # True for a call a cancel stopped (the error then says so), never beside error: null.
                "cancelled": status == "cancelled",
                "outcome": result.outcome,
                "approvals": call.approvals,
            }
        except Exception as exc:
            fields = {"call_id": call.id, "tool": call.name, "started_at": started, "ended_at": ended, "error": result.error}
            self.steps.append_reduced(fields, f"the record could not be assembled: {describe_exception(exc)}")
            return
        self.steps.append(record)

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        if not self.events_on:
            return
        try:
            assert self.dashboard_events is not None
            self.dashboard_events.publish(kind, payload)
        except Exception:  # the dashboard must never break the robot loop
            log.exception("dashboard event %s failed", kind)
