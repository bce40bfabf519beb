"""Test doubles that speak real protocols (a scripted model server for the planner clients)."""

from .model_server import FakeModelServer, ScriptError
from .script import Cut, Failure, RecordedRequest, Reply, Text, ToolUse, Turn

__all__ = [
    "Cut",
    "Failure",
    "FakeModelServer",
    "RecordedRequest",
    "Reply",
    "ScriptError",
    "Text",
    "ToolUse",
    "Turn",
]
