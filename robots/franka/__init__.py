"""Franka arms through franky: real hardware by FCI address, or franky-sim on loopback with --sim."""

from robots.franka.robot_spec import get_robot_spec, get_toolkit

__all__ = ["get_robot_spec", "get_toolkit"]
