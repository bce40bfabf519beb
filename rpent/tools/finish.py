"""The `finish` tool every robot offers, and the operator's part of what it reports.

A robot's tools list `make_finish_tool()` (with `extra_fields` for what only that robot knows, e.g.
LIBERO's attempt count), so the model sees one finish everywhere and every finish_result carries
what the operator really did: `operator_aborted` and `operator_notes`, read from the toolkit's
`OperatorRecord` (which the runner fills from the dashboard or terminal; without an operator it
stays empty and says so).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, MutableMapping
from typing import Annotated, Any, Literal

from pydantic import Field

from rpent.tools.context import ToolContext
from rpent.tools.result import finish_payload
from rpent.tools.tool import Tool, tool

#: Where a toolkit's state holds its OperatorRecord (state is what every tool's ctx.state is).
OPERATOR_KEY = "rpent.operator"

ExtraFields = Callable[[ToolContext[Any]], dict[str, Any]]


class OperatorRecord:
    """What the operator did during one task: an abort (the first reason counts) and notes, in order.

    Written from the dashboard's or terminal's thread while tools run: every access takes the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._aborted: str | None = None
        self._notes: list[str] = []

    def add_note(self, text: str) -> None:
        with self._lock:
            self._notes.append(text)

    def abort(self, reason: str) -> None:
        with self._lock:
            if self._aborted is None:
                self._aborted = reason

    @property
    def aborted(self) -> str | None:
        with self._lock:
            return self._aborted

    @property
    def notes(self) -> list[str]:
        with self._lock:
            return list(self._notes)

    def fields(self) -> dict[str, Any]:
        """The finish_result fields: {"operator_aborted": bool, "operator_notes": [...]}."""
        with self._lock:
            return {"operator_aborted": self._aborted is not None, "operator_notes": list(self._notes)}


def operator_record(state: MutableMapping[str, Any]) -> OperatorRecord:
    """The toolkit's OperatorRecord (made on first use), given the toolkit's `state`."""
    record = state.setdefault(OPERATOR_KEY, OperatorRecord())
    if not isinstance(record, OperatorRecord):
        raise TypeError(f"state[{OPERATOR_KEY!r}]: must be an OperatorRecord, got {type(record).__name__}")
    return record


def make_finish_tool(extra_fields: ExtraFields | None = None) -> Tool:
    """The finish tool; `extra_fields(ctx)` adds the robot's own fields to its result."""

    @tool
    def finish(
        status: Literal["success", "failure"],
        summary: Annotated[str, Field(min_length=1, max_length=2000)],
        *,
        ctx: ToolContext[Any],
    ) -> dict[str, Any]:
        """Report that the task is over. Call it exactly once, when done or when it cannot be done.

        Args:
            status: "success" if the task was achieved, else "failure".
            summary: One or two sentences on what was done and what was observed.
        """
        extra = extra_fields(ctx) if extra_fields is not None else {}
        return finish_payload(status=status, summary=summary, **extra, **operator_record(ctx.state).fields())

    return finish
