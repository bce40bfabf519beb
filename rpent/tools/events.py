"""The one channel through which tools, robots and planners publish to an operator's dashboard.

It lives in core, not in rpent.dashboard, because the toolkit and every robot publish through it
and must not depend on the web dashboard (rpent.dashboard re-exports it for its own users).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class DashboardEventSink(Protocol):
    """Receives events (tool started/finished, frames, planner text, status rows).

    `publish` is called from robot and planner threads: implementations must return quickly and
    never block the robot loop (queue and drop for slow consumers).
    """

    enabled: bool

    def publish(self, kind: str, payload: dict[str, Any]) -> None: ...


class NullEventSink:
    """Used when the dashboard is off: accepts everything, does nothing."""

    enabled = False

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        return None


class RecordingEventSink:
    """Keeps every event in memory, in order, for tests that check what a run published."""

    enabled = True

    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def publish(self, kind: str, payload: dict[str, Any]) -> None:
        self.events.append((kind, payload))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]
