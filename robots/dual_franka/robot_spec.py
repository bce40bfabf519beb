"""Two Franka arms in one toolkit: the Franka spec with the dual config, tools and prompts."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from robots.dual_franka.prompt_bundle import PROMPT_BUNDLE
from robots.dual_franka.toolkit import DualFrankaToolkit
from robots.franka.config import CONFIG_DIR
from robots.franka.robot_spec import FrankaSpec
from rpent.robot import FrameChannel, RunConfig
from rpent.tools import Toolkit
from rpent.tools.events import DashboardEventSink


class DualFrankaSpec(FrankaSpec):
    name = "dual_franka"
    prompts = PROMPT_BUNDLE
    default_task = "Pick up the red cube with the left arm and lift it 10 cm above the table."
    toolkit_class: type[Toolkit] = DualFrankaToolkit
    default_config = CONFIG_DIR / "franka_dual.yaml"
    # One channel per camera of the two-arm scene (robots.dual_franka.toolkit.DUAL_SIM_IMAGE_ORDER).
    dashboard = replace(FrankaSpec.dashboard, frame_channels=(  # type: ignore[arg-type]
        FrameChannel("front", "Front camera", max_fps=4.0), FrameChannel("top", "Top camera", max_fps=2.0),
        FrameChannel("left_wrist", "Left wrist camera", max_fps=4.0),
        FrameChannel("right_wrist", "Right wrist camera", max_fps=4.0)))


def get_robot_spec() -> DualFrankaSpec:
    return DualFrankaSpec()


def get_toolkit(*, runtime_kwargs: dict[str, Any], dashboard_events: DashboardEventSink | None, config: RunConfig) -> Toolkit:
    return get_robot_spec().make_toolkit(runtime_kwargs=runtime_kwargs, dashboard_events=dashboard_events, config=config)
