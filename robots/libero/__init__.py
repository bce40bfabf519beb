"""LIBERO: a simulated Franka in LIBERO's benchmark scenes, served by robots.libero.env_server.

Tools drive the arm with closed-loop motions, the gripper, an optional VLA policy and cameras;
`solved()` is LIBERO's own `check_success()`. See docs/libero.md.
"""

from robots.libero.robot_spec import get_robot_spec, get_toolkit

__all__ = ["get_robot_spec", "get_toolkit"]
