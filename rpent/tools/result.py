"""What a tool call returns: data for the model, PNG images beside it, and an error if it failed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rpent.record.step_record import StepRecord
from rpent.record.values import json_default

# Model-facing text is capped so one chatty tool cannot blow a planner's context window.
MAX_TEXT_BYTES = 60_000

# The key a finish tool puts in its data so the executor recognises an accepted finish.
FINISH_MARKER = "_finish"


# Built once: json.dumps with options builds an encoder per call, which doubled the cost of encoding
# the small result of a typical call (the executor encodes every result, see Toolkit._settle).
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=json_default)


def truncate_utf8(text: str, limit_bytes: int) -> str:
    """Return `text` cut to at most `limit_bytes` UTF-8 bytes, saying so when it cut.

    Lone surrogates, which UTF-8 cannot carry, come back as the six characters `\\udXXX`.
    """
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "backslashreplace")
        text = raw.decode("utf-8")
    if len(raw) <= limit_bytes:
        return text
    notice = f"... [truncated: showing {{shown}} of {len(raw)} bytes]"
    # Reserve room for the notice with the largest number it can print.
    budget = limit_bytes - len(notice.format(shown=len(raw)).encode("utf-8"))
    # errors="ignore" drops a multi-byte character split by the cut instead of emitting U+FFFD.
    head = raw[: max(budget, 0)].decode("utf-8", errors="ignore")
    return head + notice.format(shown=len(head.encode("utf-8")))


@dataclass
class ToolResult:
    """The outcome of one tool call.

    `data` is what the model reads (as JSON), `images` are PNG bytes delivered beside the text,
    `error` is set when the call failed. `image_paths` is filled by the toolkit when it saved the
    images under the run's output directory (planners that read images from disk use it).
    `outcome` is filled by the toolkit for a tool that declares outcome fields (`@tool(outcome=...)`):
    each field as the action reported it, e.g. `{"grasped": False}` for a grasp that closed on nothing.
    """

    data: dict[str, Any] = field(default_factory=dict)
    images: list[bytes] = field(default_factory=list)
    error: str | None = None
    image_paths: list[str] = field(default_factory=list)
    #: What each image shows (a camera's name), in image order; names the saved files
    #: (images/<call>_<tool>_<name>.png). Unnamed images (shorter list, or "") are numbered.
    image_names: list[str] = field(default_factory=list)
    outcome: dict[str, bool] = field(default_factory=dict)
    #: The earlier step whose scene these images show (a read-only analysis of it, e.g. from
    #: `ctx.last_step`): the record saves them on that step, named after it, not under this call's id.
    source_step: StepRecord | None = None

    @property
    def is_error(self) -> bool:
        return self.error is not None

    @property
    def unmet(self) -> list[str]:
        """The outcome fields the action reported false: it ran, but did not do what it was asked."""
        return [name for name, value in self.outcome.items() if not value]

    def to_dict(self) -> dict[str, Any]:
        """Data and error merged into one payload (the error under the key "error")."""
        payload = dict(self.data)
        if self.error is not None:
            payload["error"] = self.error
        return payload

    def to_text(self, limit_bytes: int = MAX_TEXT_BYTES) -> str:
        """The model-facing JSON text of `to_dict()`, at most `limit_bytes` UTF-8 bytes."""
        text = _ENCODER.encode(self.to_dict())
        return truncate_utf8(text, limit_bytes)


# How a call ended, in one word: steps.jsonl's `status`, the progress line, the dashboard's events.
CALL_STATUSES = ("ok", "failed", "cancelled", "error")
# Every error of a cancelled call starts so (`cancelled: <reason>`, `cancelled before it started: ...`).
CANCELLED_PREFIX = "cancelled"


def call_status(error: str | None, unmet: Sequence[str] = ()) -> str:
    """`cancelled` (stopped by a cancel, also before it started), `error` (refused or raised),
    `failed` (ran, but an outcome field is false: `unmet`), else `ok`."""
    if error is not None:
        return "cancelled" if error.startswith(CANCELLED_PREFIX) else "error"
    return "failed" if unmet else "ok"


def describe_call(error: str | None, unmet: Sequence[str] = ()) -> str:
    """The one text a console or a page shows for how a call ended: `ok`, `failed: grasped=false`,
    `cancelled: <reason>` or `error: <message>`."""
    status = call_status(error, unmet)
    if status == "failed":
        return "failed: " + ", ".join(f"{name}=false" for name in unmet)
    if status == "cancelled":
        return str(error)
    return f"error: {error}" if status == "error" else "ok"


def finish_payload(*, status: str, summary: str, **extra: Any) -> dict[str, Any]:
    """The data a robot's finish tool returns; the executor stores it (minus the marker) as finish_result."""
    return {FINISH_MARKER: True, "status": status, "summary": summary, **extra}
