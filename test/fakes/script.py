"""What a scripted model says: reply content, failures, and the recorded requests."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    """A unique id shaped like the real services' ids (``toolu_...``, ``msg_...``)."""
    return f"{prefix}_fake{next(_ids):06d}"


@dataclass
class Text:
    """A text block (Anthropic) or an assistant message item (OpenAI Responses)."""

    text: str


@dataclass
class ToolUse:
    """A tool call: a ``tool_use`` block, or a Responses ``function_call`` item.

    ``namespace`` only matters for the Responses API (Codex calls MCP tools by namespace).
    """

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str = field(default_factory=lambda: new_id("toolu"))
    namespace: str | None = None


@dataclass
class Cut:
    """Where a streamed reply breaks off: right after the ``nth`` SSE event of kind ``after``.

    ``after`` is an SSE event name (``content_block_start``, ``message_delta``, ...) or, for
    Anthropic deltas, a delta type (``text_delta``, ``input_json_delta``; a tool call's first
    input_json_delta is the empty one). ``drop_connection``: close the TCP connection in the
    middle of the chunked body, as a network failure or a dying proxy does (the client sees an
    incomplete read); False ends the HTTP body cleanly, the remaining events simply missing (a
    proxy that closes a stream it considers idle). Either way no ``message_stop`` arrives.
    """

    after: str
    nth: int = 1
    drop_connection: bool = True


@dataclass
class Reply:
    """One model turn. ``stop_reason`` defaults to tool_use when a ToolUse is present, else end_turn.

    ``hold``: the server waits for this event (up to ``hold_timeout_s``) before answering, so a
    test can keep a model request in flight (e.g. to abort during it) without sleeping.
    ``cut``: a streamed answer breaks off there (JSON answers are unaffected).
    """

    content: list[Text | ToolUse] = field(default_factory=list)
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    hold: threading.Event | None = None
    hold_timeout_s: float = 30.0
    cut: Cut | None = None

    def resolved_stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.content) else "end_turn"


@dataclass
class Failure:
    """An HTTP error answer, as the real API sends it (rate limit, overload, server error).

    ``mid_stream``: for a streaming request, answer 200, start the message, then send an SSE
    ``error`` event (what the real API does when it overloads during a stream).
    """

    status: int = 529
    error_type: str | None = None
    message: str = "scripted failure"
    retry_after_s: float | None = 0.01
    mid_stream: bool = False

    def resolved_error_type(self) -> str:
        if self.error_type is not None:
            return self.error_type
        return {
            400: "invalid_request_error",
            401: "authentication_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }.get(self.status, "api_error")


Answer = Reply | Failure
# A turn is a fixed answer or a function of the parsed request body (so a test can assert what
# the client sent, then answer).
Turn = Answer | Callable[[dict[str, Any]], Answer]


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    # perf_counter() when the body was read and when the last response byte was handed over
    received_at: float = 0.0
    finished_at: float | None = None

    @property
    def is_model_call(self) -> bool:
        return self.method == "POST" and self.path.endswith(("/v1/messages", "/v1/responses"))
