"""Reading one streamed Messages API reply, and refusing a reply that did not arrive whole.

A reply counts only if its stream delivered the whole message: every content block stopped, a
`message_delta` carrying a stop_reason, then `message_stop`. The SDK's accumulated message looks
the same whether the stream ended properly or broke off: a tool_use cut inside its arguments even
carries them parsed as far as they came (`"z_m": 0.0` from a cut `"z_m": 0.04`), and a cut text
reply looks like an ended turn. So a cut is detected here, from the events, and raised as
`StreamCut` before the caller can act on the message. Used by the api planner and RobotAgent, so it
lives in core: the MCP agent must not import a planner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import httpx2  # the SDK's HTTP library: this SDK lets a read error inside a stream out unwrapped

OnText = Callable[[str], Awaitable[None]]


class StreamCut(Exception):
    """The reply's stream ended before the message was complete.

    `partial` holds the content blocks as far as they arrived (text so far; a tool_use's id, name
    and its argument JSON as received, unparsed), each marked `complete` if its block had stopped.
    """

    def __init__(self, reason: str, partial: list[dict[str, Any]]) -> None:
        super().__init__(f"the model's output was cut off: {reason}")
        self.reason = reason
        self.partial = partial

    def record(self) -> dict[str, Any]:
        """A transcript entry saying that this partial reply was thrown away, not acted on."""
        return {"role": "discarded", "reason": str(self), "content": self.partial}


class _Progress:
    """What the stream has delivered so far, block by block, and whether the message ended."""

    def __init__(self) -> None:
        self.started = False
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.stopped = False

    def see(self, event: Any) -> None:
        kind = event.type
        if kind == "message_start":
            self.started = True
        elif kind == "content_block_start":
            self.blocks[event.index] = _opened(event.content_block)
        elif kind == "content_block_delta" and event.index in self.blocks:
            _extend(self.blocks[event.index], event.delta)
        elif kind == "content_block_stop" and event.index in self.blocks:
            self.blocks[event.index]["complete"] = True
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason
        elif kind == "message_stop":
            self.stopped = True

    def missing(self) -> str | None:
        """Why the message is incomplete, or None if it arrived whole."""
        if not self.started:
            return "the stream ended before message_start"
        gaps = [f"content block {i} never stopped" for i, b in sorted(self.blocks.items()) if not b["complete"]]
        if self.stop_reason is None:
            gaps.append("no stop_reason")
        if not self.stopped:
            gaps.append("no message_stop")
        return ", ".join(gaps) or None

    def cut(self, reason: str) -> StreamCut:
        return StreamCut(reason, [self.blocks[i] for i in sorted(self.blocks)])


def _opened(block: Any) -> dict[str, Any]:
    if block.type == "text":
        return {"type": "text", "text": block.text or "", "complete": False}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "partial_json": "", "complete": False}
    if block.type == "thinking":
        return {"type": "thinking", "thinking": block.thinking or "", "complete": False}
    return {"type": block.type, "complete": False}


def _extend(block: dict[str, Any], delta: Any) -> None:
    if delta.type == "text_delta" and "text" in block:
        block["text"] += delta.text
    elif delta.type == "input_json_delta" and "partial_json" in block:
        block["partial_json"] += delta.partial_json
    elif delta.type == "thinking_delta" and "thinking" in block:
        block["thinking"] += delta.thinking


async def read_message(client: anthropic.AsyncAnthropic, request: dict[str, Any], on_text: OnText | None = None) -> Any:
    """Stream one reply and return the SDK's final message, or raise StreamCut if it broke off.

    Errors before the stream starts (HTTP status, connection refused) and `error` events inside
    it come out as the SDK raises them. Text fragments reach `on_text` as they arrive, so the
    text of a reply that is then cut has already been passed on.
    """
    progress = _Progress()
    async with client.messages.stream(**request) as stream:
        try:
            async for event in stream:
                progress.see(event)
                if on_text is not None and event.type == "text":
                    await on_text(event.text)
        except (httpx2.TransportError, anthropic.APIConnectionError) as error:  # lost or timed out mid-stream
            raise progress.cut(f"the connection failed mid-stream ({type(error).__name__}: {error})") from error
        missing = progress.missing()
        if missing is not None:
            raise progress.cut(f"the stream ended early ({missing})")
        return await stream.get_final_message()
