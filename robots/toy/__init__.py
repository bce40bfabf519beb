"""Toy arm: an in-memory pick-and-place robot that needs no hardware and no simulator.

The worked example of docs/adding-a-robot.md, and the robot the runner and planner tests drive.
"""

from robots.toy.robot_spec import get_robot_spec, get_toolkit

__all__ = ["get_robot_spec", "get_toolkit"]
