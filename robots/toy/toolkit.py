"""The toy arm's toolkit: observation after each action, and the world's own success check."""

from __future__ import annotations

from typing import Any

from robots.toy.runtime import ToyWorld
from robots.toy.tools import TOY_TOOLS
from rpent.tools import Command, Toolkit, ToolResult
from rpent.tools.images import encode_png


class ToyToolkit(Toolkit):
    tools = TOY_TOOLS
    robot: ToyWorld

    def __init__(self, *, target_block: str = "red", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.target_block = target_block

    def _capture_observation(
        self, *, command: Command, result: ToolResult, elapsed_s: float
    ) -> tuple[dict[str, Any], dict[str, bytes]]:
        observation = {"action": command.name, "action_result": result.data, "elapsed_s": round(elapsed_s, 3)}
        observation.update(self.robot.state())
        return observation, {"top": encode_png(self.robot.render_top())}

    def solved(self) -> bool | None:
        return self.robot.in_bin(self.target_block)
