"""Operator interaction: approvals and questions that block a robot thread until the operator answers.

Every request gets a fresh random id; an answer names that id and is accepted only while the
request is pending. A reply to a request that was answered, timed out or cancelled (a stale
browser tab, a double click, a replayed POST) authorises nothing.

How a robot uses it (robot-agnostic; `events` is the sink `init_runtime` and `get_toolkit` get):

    from rpent.dashboard.interaction import interaction_from
    operator = interaction_from(events)          # None when no dashboard runs
    if operator is not None:
        ok = operator.request_approval("move_to x=0.4 y=0.1 z=0.2", timeout_s=30)   # False = deny
        answer = operator.ask("Which cube?", timeout_s=120)                          # None = no answer

`OperatorInteraction.request(request_id, description, timeout_s, on_cancel)` also satisfies
`rpent.runtime.arm.ApprovalChannel`, so it can be handed to a runtime as its approval channel. With
`on_cancel=ctx.on_cancel`, cancelling the tool call closes its request at once as "cancelled": the
page drops it and an answer to its id is refused (StaleRequest, and a warning in the log).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from rpent.runtime.arm import OnCancel

log = logging.getLogger(__name__)

Publish = Callable[[str, dict[str, Any]], Any]
RequestKind = Literal["approval", "question"]


class StaleRequest(LookupError):
    """The answer names a request that is not pending (answered, timed out, cancelled or unknown)."""


@dataclass
class _Pending:
    id: str
    kind: RequestKind
    text: str
    timeout_s: float
    created: float
    details: dict[str, Any] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)
    approved: bool = False
    answer: str | None = None
    outcome: str = "pending"

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            "timeout_s": self.timeout_s,
            "created": self.created,
            "deadline": self.created + self.timeout_s,  # epoch seconds: unanswered by then, it is denied
            "details": self.details,
        }


class OperatorInteraction:
    """Requests from robot threads to the operator, answered through the dashboard."""

    #: Who answers through this channel, for the record of each approval (ApprovalChannel users read it).
    operator = "dashboard"

    def __init__(self, publish: Publish) -> None:
        self._publish = publish
        self._lock = threading.Lock()
        self._pending: dict[str, _Pending] = {}

    # ---- robot side ---------------------------------------------------------------------------

    def request_approval(
        self,
        description: str,
        timeout_s: float,
        *,
        details: dict[str, Any] | None = None,
        on_cancel: OnCancel | None = None,
    ) -> bool:
        """Block until the operator approves (True) or denies (False); timeout or cancel denies."""
        request = self._open("approval", description, timeout_s, details)
        self._wait(request, on_cancel)
        return request.outcome == "approved"

    def ask(
        self,
        question: str,
        timeout_s: float,
        *,
        details: dict[str, Any] | None = None,
        on_cancel: OnCancel | None = None,
    ) -> str | None:
        """Block until the operator answers; None after `timeout_s` or when cancelled."""
        request = self._open("question", question, timeout_s, details)
        self._wait(request, on_cancel)
        return request.answer if request.outcome == "answered" else None

    def request(self, request_id: str, description: str, timeout_s: float, on_cancel: OnCancel | None = None) -> bool:
        """The `ApprovalChannel` form: the runtime's own id is shown, a fresh id guards the answer."""
        details = {"robot_request_id": request_id}
        return self.request_approval(description, timeout_s, details=details, on_cancel=on_cancel)

    # ---- operator side ------------------------------------------------------------------------

    def respond(self, request_id: str, *, approve: bool | None = None, answer: str | None = None) -> str:
        """Answer a pending request; returns the outcome. Raises StaleRequest or ValueError."""
        with self._lock:
            request = self._pending.get(request_id)
            if request is None:
                # Worth a trace: an operator acting on a question that no longer stands.
                log.warning("refused an answer to operator request %r: it is not pending", request_id)
                raise StaleRequest(f"request {request_id!r} is not pending (answered, timed out, cancelled or unknown)")
            if request.kind == "approval":
                if not isinstance(approve, bool):
                    raise ValueError("approve: an approval request needs approve=true or approve=false")
                request.approved = approve
                outcome = "approved" if approve else "denied"
            else:
                if not isinstance(answer, str) or not answer.strip():
                    raise ValueError("answer: a question needs a non-empty answer text")
                request.answer = answer
                outcome = "answered"
            self._close_locked(request, outcome)
        return outcome

    def cancel_all(self, reason: str = "cancelled") -> int:
        """Close every pending request (approvals count as denied); returns how many were open."""
        with self._lock:
            requests = list(self._pending.values())
            for request in requests:
                self._close_locked(request, "cancelled", reason)
        return len(requests)

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.public() for r in self._pending.values()]

    # ---- internals ----------------------------------------------------------------------------

    def _open(self, kind: RequestKind, text: str, timeout_s: float, details: dict[str, Any] | None) -> _Pending:
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{'description' if kind == 'approval' else 'question'}: must be a non-empty string")
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or timeout_s <= 0:
            raise ValueError(f"timeout_s: must be a positive number of seconds, got {timeout_s!r}")
        request = _Pending(f"req-{secrets.token_hex(8)}", kind, text, float(timeout_s), time.time(), dict(details or {}))
        with self._lock:
            self._pending[request.id] = request
            # Published under the lock so a request's "closed" event can never precede its "opened" one.
            self._publish("operator_request", request.public())
        return request

    def _wait(self, request: _Pending, on_cancel: OnCancel | None) -> None:
        # Hooked after `_open`, so a call cancelled before it asked closes its request right here.
        unhook = None
        if on_cancel is not None:
            unhook = on_cancel(lambda: self._close_if_pending(request, "cancelled", "the tool call was cancelled"))
        try:
            if not request.done.wait(request.timeout_s):
                self._close_if_pending(request, "timed_out")
        finally:
            if unhook is not None:
                unhook()

    def _close_if_pending(self, request: _Pending, outcome: str, reason: str | None = None) -> None:
        """Close unless an answer, a timeout or a cancel closed it first: the first one decides."""
        with self._lock:
            if request.id in self._pending:
                self._close_locked(request, outcome, reason)

    def _close_locked(self, request: _Pending, outcome: str, reason: str | None = None) -> None:
        self._pending.pop(request.id, None)
        request.outcome = outcome
        payload: dict[str, Any] = {"id": request.id, "kind": request.kind, "outcome": outcome}
        if request.answer is not None:
            payload["answer"] = request.answer
        if reason:
            payload["reason"] = reason
        self._publish("operator_request_closed", payload)
        request.done.set()


def interaction_from(events: Any) -> OperatorInteraction | None:
    """The dashboard's interaction handle carried by an event sink (or a fan-out of sinks), else None."""
    found = getattr(events, "interaction", None)
    if isinstance(found, OperatorInteraction):
        return found
    for sink in getattr(events, "sinks", ()) or ():
        found = interaction_from(sink)
        if found is not None:
            return found
    return None
