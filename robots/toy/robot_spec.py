"""How the toy arm is configured, started and turned into a toolkit."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from robots.toy.prompt_bundle import PROMPT_BUNDLE
from robots.toy.runtime import ToyWorld
from robots.toy.toolkit import ToyToolkit
from rpent.robot import (
    ConfigError,
    Dashboard,
    FrameChannel,
    RobotSpec,
    RunConfig,
    RuntimeComponent,
    TaskField,
    memory_for,
)
from rpent.robot.scene_reset import SCENE_RESET_KEY, SceneReset
from rpent.tools.events import DashboardEventSink


class ToySpec(RobotSpec):
    name = "toy"
    prompts = PROMPT_BUNDLE
    default_task = "Put the red block in the bin."
    toolkit_class = ToyToolkit
    dashboard = Dashboard(
        task_command="Start task",
        task_fields=(TaskField("task", "Task", "text", default="Put the red block in the bin."),),
        components=(RuntimeComponent("world", "Toy world", shared=True),),
        frame_channels=(FrameChannel("top", "Top view", max_fps=10.0),),
    )

    def add_cli_args(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_argument_group("toy robot")
        group.add_argument("--speed", type=float, default=0.5, help="gripper speed in m/s (0 < speed <= 2; default 0.5)")
        group.add_argument("--target-block", default="red", help="block that must end in the bin (default red)")

    def parse_config(self, args: argparse.Namespace) -> RunConfig:
        speed = getattr(args, "speed", 0.5)
        if not 0 < speed <= 2:
            raise ConfigError(f"--speed: must be > 0 and <= 2 m/s, got {speed}")
        target = getattr(args, "target_block", "red")
        blocks = sorted(ToyWorld().blocks)
        if target not in blocks:
            raise ConfigError(f"--target-block: must be one of {blocks}, got {target!r}")
        config = self.base_config(args)
        config.options.update(speed_m_s=speed, target_block=target)
        return config

    def init_runtime(
        self, config: RunConfig, *, selection: Sequence[str] | None = None, events: DashboardEventSink
    ) -> dict[str, Any]:
        if not self.selects(selection, "world"):
            return {}
        world = ToyWorld(speed_m_s=config.options.get("speed_m_s", 0.5))
        # frame_sources: the dashboard samples these for its live views (rpent.dashboard.frames);
        # the scene reset puts the table back before each dashboard task (rpent.robot.scene_reset).
        return {"world": world, "frame_sources": {"top": world.render_top},
                SCENE_RESET_KEY: SceneReset("gripper open at its start, blocks back where they started", world.reset)}


def get_robot_spec() -> ToySpec:
    return ToySpec()


def get_toolkit(
    *, runtime_kwargs: dict[str, Any], dashboard_events: DashboardEventSink | None, config: RunConfig
) -> ToyToolkit:
    return ToyToolkit(
        robot=runtime_kwargs["world"],
        memory=memory_for(config, "toy"),
        output_dir=config.output_dir,
        dashboard_events=dashboard_events,
        target_block=config.options.get("target_block", "red"),
    )
