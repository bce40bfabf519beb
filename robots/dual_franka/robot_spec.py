"""Two Franka arms in one toolkit: the Franka spec with the dual config, tools and prompts."""

from __future__ import annotations

from typing import Any

from robots.dual_franka.prompt_bundle import PROMPT_BUNDLE
from robots.dual_franka.toolkit import DualFrankaToolkit
from robots.franka.config import CONFIG_DIR
from robots.franka.robot_spec import FrankaSpec
from rpent.robot import RunConfig
from rpent.tools import Toolkit
from rpent.tools.events import DashboardEventSink


class DualFrankaSpec(FrankaSpec):
    name = "dual_franka"
    prompts = PROMPT_BUNDLE
    default_task = "Pick up the red cube with the left arm and lift it 10 cm above the table."
    toolkit_class: type[Toolkit] = DualFrankaToolkit
    default_config = CONFIG_DIR / "franka_dual.yaml"


def get_robot_spec() -> DualFrankaSpec:
    return DualFrankaSpec()


def get_toolkit(*, runtime_kwargs: dict[str, Any], dashboard_events: DashboardEventSink | None, config: RunConfig) -> Toolkit:
    return get_robot_spec().make_toolkit(runtime_kwargs=runtime_kwargs, dashboard_events=dashboard_events, config=config)
