"""The stream reader moved to core (rpent.message_stream); kept under this name for the api planner."""

from rpent.message_stream import StreamCut, read_message

__all__ = ["StreamCut", "read_message"]
