"""Kept for code that imports CameraProxy from here; proxies are built from a robot's declared
runtime nodes in rpent_ros.remote_runtime."""

from rpent_ros.remote_runtime import CameraProxy

__all__ = ["CameraProxy"]
