"""What a robot package provides (RobotSpec, prompts, run configuration, dashboard spec) and how it is found."""

from rpent.robot.discovery import RobotNotFound, list_robots, load_robot
from rpent.robot.spec import (
    ConfigError,
    Dashboard,
    FrameChannel,
    PromptBundle,
    RobotSpec,
    RunConfig,
    RuntimeComponent,
    TaskField,
    memory_for,
    template,
)

__all__ = [
    "ConfigError",
    "Dashboard",
    "FrameChannel",
    "PromptBundle",
    "RobotNotFound",
    "RobotSpec",
    "RunConfig",
    "RuntimeComponent",
    "TaskField",
    "list_robots",
    "load_robot",
    "memory_for",
    "template",
]
