"""Taking a managed runtime node (arm, gripper, camera) through its lifecycle in a test."""

from __future__ import annotations

from typing import Any

from rclpy.lifecycle import TransitionCallbackReturn


def activated(node: Any) -> Any:
    """Configure (connect) and activate `node`, as the launch files do; returns it."""
    assert node.trigger_configure() == TransitionCallbackReturn.SUCCESS, node.diagnostics.connect_error
    assert node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    return node
