"""Two Franka arms in one toolkit: the Franka observation and success check, the dual tool set."""

from __future__ import annotations

from robots.dual_franka.tools import DUAL_FRANKA_TOOLS
from robots.franka.toolkit import FrankaToolkit


class DualFrankaToolkit(FrankaToolkit):
    tools = DUAL_FRANKA_TOOLS
    robot_name = "dual_franka"


# The dual scene's cameras, in image order: the fixed ones, then each arm's wrist camera.
DUAL_SIM_IMAGE_ORDER = ["front", "top", "left_wrist", "right_wrist"]
