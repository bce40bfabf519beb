"""Small tools and toolkits the core tests drive."""

from __future__ import annotations

import threading
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from rpent.tools import Command, ToolContext, Toolkit, ToolResult, finish_payload, readonly, tool
from rpent.tools.images import encode_png


class Gates:
    """Per-test coordination: handlers record when they start and block until released."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: list[str] = []
        self.started_events: dict[str, threading.Event] = {}
        self.release_events: dict[str, threading.Event] = {}
        self.barrier: threading.Barrier | None = None

    def started_event(self, label: str) -> threading.Event:
        with self.lock:
            return self.started_events.setdefault(label, threading.Event())

    def release_event(self, label: str) -> threading.Event:
        with self.lock:
            return self.release_events.setdefault(label, threading.Event())

    def enter(self, label: str) -> None:
        with self.lock:
            self.started.append(label)
        self.started_event(label).set()

    def release(self, label: str) -> None:
        self.release_event(label).set()


@tool
def work(label: str, block: bool = False, *, ctx: ToolContext[Gates]) -> dict[str, Any]:
    """Exclusive work that may block until the test releases it.

    Args:
        label: Name recorded when the call starts.
        block: Wait for the test to release this label.
    """
    ctx.robot.enter(label)
    if block:
        while not ctx.robot.release_event(label).wait(0.01):
            ctx.check_cancelled()
    return {"label": label}


@tool
@readonly
def peek(label: str, block: bool = False, meet: bool = False, *, ctx: ToolContext[Gates]) -> dict[str, Any]:
    """Read-only work that may block, or meet another read-only call at a barrier.

    Args:
        label: Name recorded when the call starts.
        block: Wait for the test to release this label.
        meet: Wait at the shared barrier (proves two calls overlap).
    """
    ctx.robot.enter(label)
    if meet:
        assert ctx.robot.barrier is not None
        ctx.robot.barrier.wait(timeout=5)
    if block:
        while not ctx.robot.release_event(label).wait(0.01):
            ctx.check_cancelled()
    return {"label": label}


@tool
def fail(message: str = "boom", *, ctx: ToolContext[Gates]) -> dict[str, Any]:
    """Always raise.

    Args:
        message: The error text.
    """
    raise RuntimeError(message)


@tool
def spin(*, ctx: ToolContext[Gates]) -> dict[str, Any]:
    """Run until cancelled, recording a frame per iteration."""
    ctx.robot.enter("spin")
    frame = np.zeros((48, 64, 3), np.uint8)
    while True:
        ctx.record_frame(frame)
        ctx.check_cancelled()
        ctx.wait_cancelled(0.01)


@tool
def paint(frames: Annotated[int, Field(ge=1, le=200)] = 10, *, ctx: ToolContext[Gates]) -> dict[str, Any]:
    """Record frames of a moving square.

    Args:
        frames: How many frames.
    """
    for i in range(frames):
        image = np.zeros((120, 160, 3), np.uint8)
        image[40:80, i : i + 40] = (255, 0, 0)
        ctx.record_frame(image)
    return {"frames": frames}


@tool
def finish(
    status: Annotated[str, Field(pattern="^(success|failure)$")], summary: str = "", *, ctx: ToolContext[Gates]
) -> dict[str, Any]:
    """End the task.

    Args:
        status: success or failure.
        summary: What happened.
    """
    return finish_payload(status=status, summary=summary, operator_notes=[])


GATE_TOOLS = [work, peek, fail, spin, paint, finish]


class ObservingToolkit(Toolkit):
    """A robot toolkit whose observation is a counter and one small image."""

    tools = GATE_TOOLS

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.captures: list[Command] = []
        self.capture_gate: threading.Event | None = None

    def _capture_observation(
        self, *, command: Command, result: ToolResult, elapsed_s: float
    ) -> tuple[dict[str, Any], list[bytes]]:
        if self.capture_gate is not None:
            self.capture_gate.wait(5)
        self.captures.append(command)
        observation = {"observed_after": command.name, "action": result.data, "elapsed_s": elapsed_s}
        return observation, [encode_png(np.full((8, 8, 3), len(self.captures) % 256, np.uint8))]
