"""The Anthropic Messages API as the `api` planner speaks it: blocks sent back, tool results with
inline images, the moving prompt-cache breakpoint, and which failures are worth a retry."""

from __future__ import annotations

import base64
import random
from typing import Any

import anthropic

from rpent.message_stream import StreamCut
from rpent.tools.result import ToolResult

CACHE = {"type": "ephemeral"}
_CACHEABLE_BLOCKS = frozenset({"text", "image", "tool_use", "tool_result"})  # not thinking blocks
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_RETRYABLE_ERROR_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error"})


def block_dict(block: Any) -> dict[str, Any]:
    """A reply's content block as it goes back to the API in the next request."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    # Thinking and server-tool blocks go back verbatim (signatures included).
    data = block.model_dump(mode="json", exclude_none=True)
    data.pop("parsed_output", None)
    return data


def tool_result_blocks(tool_use_id: str, result: ToolResult) -> tuple[dict[str, Any], dict[str, Any]]:
    """The block for the API (images inline) and the one for the transcript (image paths)."""
    text = {"type": "text", "text": result.to_text()}
    api_content: list[dict[str, Any]] = [text]
    record_content: list[dict[str, Any]] = [text]
    for index, png in enumerate(result.images):
        data = base64.b64encode(png).decode("ascii")
        api_content.append({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})
        if index < len(result.image_paths):
            record_content.append({"type": "image", "path": result.image_paths[index]})
        else:
            record_content.append({"type": "image", "omitted": f"PNG, {len(png)} bytes, not saved"})
    api_block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": api_content}
    record_block = dict(api_block, content=record_content)
    if result.is_error:
        api_block["is_error"] = record_block["is_error"] = True
    return api_block, record_block


def with_cache_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with a cache breakpoint on the newest cacheable block (the originals are not touched)."""
    if not messages:
        return messages
    # A moving cache breakpoint on the newest block lets the next turn reuse the whole prefix.
    last = messages[-1]
    content = list(last["content"])
    for index in range(len(content) - 1, -1, -1):
        if content[index].get("type") in _CACHEABLE_BLOCKS:
            content[index] = dict(content[index], cache_control=CACHE)
            return [*messages[:-1], dict(last, content=content)]
    return messages


def retryable(error: Exception) -> bool:
    if isinstance(error, (anthropic.APIConnectionError, StreamCut)):  # a cut stream is a dropped connection
        return True
    assert isinstance(error, anthropic.APIStatusError)
    if error.status_code in _RETRYABLE_STATUS or error.status_code >= 500:
        return True
    body = error.body if isinstance(error.body, dict) else {}
    detail = body.get("error") if isinstance(body.get("error"), dict) else body
    return detail.get("type") in _RETRYABLE_ERROR_TYPES


def requested_wait(error: Exception) -> float | None:
    """The wait the service asked for before a retry (`retry-after-ms`, else `retry-after` seconds), if any."""
    response = getattr(error, "response", None)
    if response is None or response.status_code == 200:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            wait = float(response.headers[name]) * scale
        except (KeyError, TypeError, ValueError):
            continue
        if wait >= 0 and wait == wait:  # not NaN
            return wait
    return None


def backoff_delay(attempt: int, base_delay_s: float, max_delay_s: float) -> float:
    """Jittered exponential backoff, for failures the service gave no Retry-After for."""
    backoff = min(base_delay_s * 2**attempt, max_delay_s)
    return backoff * (0.75 + 0.25 * random.random())


def describe(error: Exception) -> str:
    if isinstance(error, StreamCut):
        return error.reason
    status = getattr(error, "status_code", None)
    return f"{type(error).__name__} {status}" if status else type(error).__name__
