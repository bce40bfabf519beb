"""The modules the Core interfaces name exist where a robot package or a script imports them:
`rpent.tools.common_tools`, and each robot's `prompt_bundle.py` with the prompts its spec uses."""

from __future__ import annotations

import importlib

import pytest

from rpent.robot import PromptBundle, list_robots
from rpent.tools import Toolkit


def test_common_tools_are_importable_by_the_interface_name_and_offered_by_every_toolkit() -> None:
    from rpent.tools.common_tools import COMMON_TOOLS, list_dir, read_image, read_text_file, stop, write_text_file

    assert [t.name for t in COMMON_TOOLS] == ["read_text_file", "write_text_file", "list_dir", "read_image", "stop"]
    assert {read_text_file, write_text_file, list_dir, read_image, stop} == set(COMMON_TOOLS)
    assert [t.name for t in Toolkit(tools=[]).list_tools()] == [t.name for t in COMMON_TOOLS]


@pytest.mark.parametrize("robot", list_robots())
def test_each_robot_has_the_prompt_bundle_its_spec_uses(robot: str) -> None:
    bundle = importlib.import_module(f"robots.{robot}.prompt_bundle")
    spec = importlib.import_module(f"robots.{robot}").get_robot_spec()
    assert isinstance(bundle.PROMPT_BUNDLE, PromptBundle) and spec.prompts is bundle.PROMPT_BUNDLE
    variables = {"task": "Lift the cube.", "robot": robot, "memory_dir": "/tmp/memory", "arms": "left, right",
                 "suite": "libero_object", "task_id": 0, "task_name": "t", "instruction": "Lift the cube.",
                 "mode": "normal", "attempts_per_session": 3}
    system, user = spec.prompts.render(variables)
    assert bundle.system_prompt(variables) == system and bundle.user_prompt(variables) == user
    assert "Lift the cube." in user
