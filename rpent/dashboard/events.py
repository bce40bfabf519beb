"""The dashboard's event channel; defined in core (rpent.tools.events) so publishers need no dashboard."""

from rpent.tools.events import DashboardEventSink, NullEventSink, RecordingEventSink

__all__ = ["DashboardEventSink", "NullEventSink", "RecordingEventSink"]
