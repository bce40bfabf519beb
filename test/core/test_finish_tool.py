"""The finish tool as robot packages and planners see it: one core factory, and a finish_result that
carries what the operator really did (operator_aborted, operator_notes) on every robot."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import pytest

from robots.toy.runtime import ToyWorld
from rpent.planner.base import Planner, PlannerResult, PlannerStatus
from rpent.record.run_record import RunRecord
from rpent.robot import RunConfig
from rpent.robot.discovery import load_robot
from rpent.runner.task import TaskRun
from rpent.tools import Toolkit
from rpent.tools.finish import make_finish_tool, operator_record

ROBOTS = ["toy", "libero", "franka", "dual_franka"]


@pytest.mark.parametrize("robot", ROBOTS)
def test_every_robot_offers_the_core_finish_tool(robot: str) -> None:
    spec = importlib.import_module(f"robots.{robot}").get_robot_spec()
    (finish,) = [t for t in spec.list_tools() if t.name == "finish"]
    core = make_finish_tool()
    assert finish.input_schema == core.input_schema and finish.description == core.description


@pytest.mark.parametrize("robot", ROBOTS)
def test_finish_result_carries_the_operators_notes_on_every_robot(robot: str) -> None:
    spec = importlib.import_module(f"robots.{robot}").get_robot_spec()
    toolkit = Toolkit(tools=spec.toolkit_class.tools)  # no hardware: finish needs none
    operator_record(toolkit.state).add_note("the cube was chipped")
    result = toolkit.execute_tool("finish", {"status": "success", "summary": "lifted"})
    assert result.error is None
    assert toolkit.finish_result == {"status": "success", "summary": "lifted", "operator_aborted": False,
                                     "operator_notes": ["the cube was chipped"]}


def test_a_robot_adds_its_own_fields_through_the_factory() -> None:
    finish = make_finish_tool(extra_fields=lambda ctx: {"attempts": ctx.state["attempt"]})
    toolkit = Toolkit(tools=[finish], state={"attempt": 2})
    toolkit.execute_tool("finish", {"status": "failure", "summary": "dropped it"})
    assert toolkit.finish_result == {"status": "failure", "summary": "dropped it", "attempts": 2,
                                     "operator_aborted": False, "operator_notes": []}


class NotedFinish(Planner):
    """An operator note arrives mid-task (through TaskRun, as the dashboard sends it), then finish."""

    name = "noted"

    def __init__(self) -> None:
        self.task: TaskRun | None = None
        self.result: PlannerResult | None = None

    def solve(self, *, toolkit: Toolkit, **_: Any) -> PlannerResult:
        toolkit.execute_tool("get_state", {})
        assert self.task is not None
        self.task.add_note("the bin was moved")
        toolkit.execute_tool("finish", {"status": "success", "summary": "done"})
        self.result = PlannerResult(PlannerStatus.FINISHED, "finished", dict(toolkit.finish_result or {}))
        return self.result


def test_planner_result_and_record_carry_the_real_operator_notes_once(tmp_path: Path) -> None:
    robot = load_robot("toy")
    spec = robot.get_robot_spec()
    config = RunConfig(robot="toy", task="t", output_dir=tmp_path / "run", recipe_tag="toy",
                       prompt_vars={"task": "t", "robot": "toy", "memory_dir": str(tmp_path / "memory")})
    planner = NotedFinish()
    task = TaskRun(spec=spec, robot=robot, config=config, planner=planner, planner_name="noted", max_turns=5,
                   runtime_kwargs={"world": ToyWorld()}, events=None, record=RunRecord.open(config.output_dir))
    planner.task = task
    summary = task.run()
    expected = {"operator_aborted": False, "operator_notes": ["the bin was moved"]}
    assert planner.result is not None
    assert {k: planner.result.finish_result[k] for k in expected} == expected
    assert {k: summary["finish_result"][k] for k in expected} == expected  # not doubled by the runner
