"""OpenAI Responses API wire format (SSE), as the Codex CLI consumes it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

from .anthropic_wire import estimate_tokens
from .script import Failure, Reply, Text, ToolUse, new_id


def _item(block: Text | ToolUse) -> dict[str, Any]:
    if isinstance(block, Text):
        return {
            "type": "message",
            "id": new_id("msg"),
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": block.text, "annotations": []}],
        }
    item: dict[str, Any] = {
        "type": "function_call",
        "id": new_id("fc"),
        "call_id": block.id,
        "name": block.name,
        "arguments": json.dumps(block.input),
        "status": "completed",
    }
    if block.namespace is not None:
        item["namespace"] = block.namespace
    return item


def _response(request: dict[str, Any], response_id: str, status: str,
              output: list[dict[str, Any]], usage: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": request.get("model", "fake-model"),
        "output": output,
        "usage": usage,
    }


def error_json(failure: Failure) -> dict[str, Any]:
    return {"error": {"type": failure.resolved_error_type(), "message": failure.message,
                      "code": failure.resolved_error_type()}}


def response_events(request: dict[str, Any], reply: Reply) -> Iterator[bytes]:
    sequence = 0

    def sse(event: str, data: dict[str, Any]) -> bytes:
        nonlocal sequence
        sequence += 1
        payload = dict(data, type=event, sequence_number=sequence)
        return f"event: {event}\ndata: {json.dumps(payload)}\n\n".encode()

    response_id = new_id("resp")
    yield sse("response.created", {"response": _response(request, response_id, "in_progress", [], None)})
    yield sse("response.in_progress", {"response": _response(request, response_id, "in_progress", [], None)})
    items = []
    for index, block in enumerate(reply.content):
        item = _item(block)
        items.append(item)
        if isinstance(block, Text):
            opening = dict(item, status="in_progress", content=[])
            yield sse("response.output_item.added", {"output_index": index, "item": opening})
            part = {"type": "output_text", "text": "", "annotations": []}
            yield sse("response.content_part.added", {"item_id": item["id"], "output_index": index,
                                                      "content_index": 0, "part": part})
            for start in range(0, len(block.text), 16):
                yield sse("response.output_text.delta", {"item_id": item["id"], "output_index": index,
                                                         "content_index": 0,
                                                         "delta": block.text[start:start + 16]})
            yield sse("response.output_text.done", {"item_id": item["id"], "output_index": index,
                                                    "content_index": 0, "text": block.text})
            yield sse("response.content_part.done", {"item_id": item["id"], "output_index": index,
                                                     "content_index": 0, "part": item["content"][0]})
        else:
            opening = dict(item, status="in_progress", arguments="")
            yield sse("response.output_item.added", {"output_index": index, "item": opening})
            yield sse("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": index,
                                                                 "delta": item["arguments"]})
            yield sse("response.function_call_arguments.done", {"item_id": item["id"], "output_index": index,
                                                                "arguments": item["arguments"]})
        yield sse("response.output_item.done", {"output_index": index, "item": item})
    input_tokens = estimate_tokens(request.get("input", []))
    output_tokens = sum(estimate_tokens(b.text if isinstance(b, Text) else b.input) for b in reply.content) or 1
    usage = {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output_tokens,
    }
    usage.update(reply.usage)
    yield sse("response.completed", {"response": _response(request, response_id, "completed", items, usage)})


def failing_events(request: dict[str, Any], failure: Failure) -> Iterator[bytes]:
    response_id = new_id("resp")
    yield f"event: response.created\ndata: {json.dumps({'type': 'response.created', 'response': _response(request, response_id, 'in_progress', [], None)})}\n\n".encode()
    failed = _response(request, response_id, "failed", [], None)
    failed["error"] = error_json(failure)["error"]
    yield f"event: response.failed\ndata: {json.dumps({'type': 'response.failed', 'response': failed})}\n\n".encode()
