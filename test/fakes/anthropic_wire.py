"""Anthropic Messages API wire format: a Reply as a JSON message or as the SSE event sequence."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .script import Failure, Reply, Text, ToolUse, new_id


def estimate_tokens(value: Any) -> int:
    """A rough, deterministic token count (about 4 characters a token), never zero."""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return max(1, len(text) // 4)


def _usage(request: dict[str, Any], reply: Reply) -> dict[str, int]:
    output = sum(
        estimate_tokens(b.text if isinstance(b, Text) else b.input) for b in reply.content
    ) or 1
    usage = {
        "input_tokens": estimate_tokens(request.get("messages", [])),
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    usage.update(reply.usage)
    return usage


def _block(block: Text | ToolUse) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}


def message_json(request: dict[str, Any], reply: Reply) -> dict[str, Any]:
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "fake-model"),
        "content": [_block(b) for b in reply.content],
        "stop_reason": reply.resolved_stop_reason(),
        "stop_sequence": None,
        "usage": _usage(request, reply),
    }


def error_json(failure: Failure) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": failure.resolved_error_type(), "message": failure.message},
    }


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _chunks(text: str, size: int) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start : start + size]


def message_events(request: dict[str, Any], reply: Reply) -> Iterator[bytes]:
    """The real event order: message_start, ping, per block start/deltas/stop, message_delta, stop."""
    message = message_json(request, reply)
    usage = message["usage"]
    start = dict(message, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))
    yield _sse("message_start", {"type": "message_start", "message": start})
    yield _sse("ping", {"type": "ping"})
    for index, block in enumerate(reply.content):
        if isinstance(block, Text):
            opening: dict[str, Any] = {"type": "text", "text": ""}
        else:
            opening = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": index, "content_block": opening},
        )
        if isinstance(block, Text):
            deltas = [{"type": "text_delta", "text": c} for c in _chunks(block.text, 16)]
        else:
            # The real API opens with an empty partial_json and splits the arguments anywhere.
            encoded = json.dumps(block.input)
            deltas = [{"type": "input_json_delta", "partial_json": ""}]
            deltas += [{"type": "input_json_delta", "partial_json": c} for c in _chunks(encoded, 12)]
        for delta in deltas:
            yield _sse(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def failing_events(request: dict[str, Any], failure: Failure) -> Iterator[bytes]:
    """A stream that starts normally and then reports an error event (overload mid-stream)."""
    start = message_json(request, Reply())
    start.update(stop_reason=None)
    yield _sse("message_start", {"type": "message_start", "message": start})
    yield _sse("error", error_json(failure))
