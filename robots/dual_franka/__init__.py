"""Two Franka arms (left, right) through franky, real or in franky-sim with --sim."""

from robots.dual_franka.robot_spec import get_robot_spec, get_toolkit

__all__ = ["get_robot_spec", "get_toolkit"]
