"""What the claude_code and codex planner tests share: the watched toy robot and the scenarios whose
story is the same for both CLIs. Each test file passes its own `solve` and `robot` (the CLIs name the
robot's tools differently) and a reader for its wire format."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fakes import FakeModelServer, Reply, Text

from robots.toy.runtime import ToyWorld
from robots.toy.toolkit import ToyToolkit
from rpent.memory import MemoryManager
from rpent.planner.base import AbortRequest, OperatorMessage, PlannerResult, PlannerStatus, build_planner
from rpent.planner.cli_common import NUDGE_TEXT

Solve = Callable[..., PlannerResult]
Robot = Callable[..., Any]
#: The request body -> the text the model was shown last (a tool result, or the user turn).
LastText = Callable[[dict[str, Any]], str]


class WatchedWorld(ToyWorld):
    """The toy world, telling the test when a motion has started."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.moving = threading.Event()

    def move_to(self, target: Any, *, should_stop: Any, on_step: Any) -> bool:
        def step() -> None:
            self.moving.set()
            on_step()
        return super().move_to(target, should_stop=should_stop, on_step=step)


def make_toolkit(tmp_path: Path, speed_m_s: float = 0.5) -> ToyToolkit:
    return ToyToolkit(robot=WatchedWorld(speed_m_s=speed_m_s), output_dir=tmp_path / "run",
                      memory=MemoryManager(tmp_path / "memory"))


def text_of(content: str | list[dict[str, Any]], part_type: str) -> str:
    """A tool result's text as the CLI sent it back: a plain string, or the `part_type` parts of a list, one a line."""
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if part.get("type") == part_type)


def called(result: PlannerResult) -> list[str]:
    """The robot's tools in the order the MCP bridge ran them. Only the bridge's record has both a name and
    content: Claude Code's own tool results (Read) come without a name, Codex's items without content."""
    return [e["name"] for e in result.transcript if e.get("role") == "tool" and "name" in e and "content" in e]


SYSTEM_PROMPT = "You drive a toy arm. ROBOT-PROMPT"
TASK = "Put the red block in the bin."


def solver(planner: str, model: str, api_path: str = "") -> Solve:
    """`solve(server, toolkit, *, max_turns=10, input_queue=None, **options)`: one run of the named CLI
    planner on the toy task, talking to the fake model server (at `api_path` below its URL)."""

    def solve(server: FakeModelServer, toolkit: ToyToolkit, *, max_turns: int = 10, input_queue: Any = None,
              **options: Any) -> PlannerResult:
        run = build_planner(planner, model=model, base_url=server.base_url + api_path, api_key="test-key", **options)
        return run.solve(system_prompt=SYSTEM_PROMPT, user_message=TASK, toolkit=toolkit, max_turns=max_turns,
                         input_queue=input_queue)

    return solve


def abort_mid_motion(model_server: FakeModelServer, tmp_path: Path, solve: Solve, robot: Robot) -> None:
    """An operator abort during a 30 s motion stops the arm early and ends the run aborted."""
    toolkit = make_toolkit(tmp_path, speed_m_s=0.01)  # 0.3 m takes 30 s
    inputs: queue.Queue[Any] = queue.Queue()
    model_server.script(Reply([robot("move_to", x_m=0.0, y_m=0.3, z_m=0.2)]))
    model_server.when_exhausted = Reply([Text("Stopped.")])
    outcome: list[PlannerResult] = []
    runner = threading.Thread(target=lambda: outcome.append(solve(model_server, toolkit, input_queue=inputs)))
    try:
        runner.start()
        assert toolkit.robot.moving.wait(120), "the motion never started"
        inputs.put(AbortRequest("operator pressed stop"))
        runner.join(60)
        assert not runner.is_alive(), "the planner did not return after the abort"
        (result,) = outcome
        assert result.status is PlannerStatus.ABORTED and "operator pressed stop" in result.stop_reason
        assert toolkit.robot.stops == 1 and toolkit.robot.gripper_xyz[0] > 0.2  # stopped early, far from x=0
        position = list(toolkit.robot.gripper_xyz)
        assert toolkit.execute_tool("get_state", {}).data["gripper_xyz_m"] == [round(v, 4) for v in position]
        assert result.finish_result is None
    finally:
        inputs.put(AbortRequest("test cleanup"))
        runner.join(60)
        toolkit.close()


def _operator_message_reaches_the_model(model_server: FakeModelServer, toolkit: ToyToolkit, solve: Solve,
                                       robot: Robot, first_reply: Reply, text: str,
                                       seen_by: LastText) -> tuple[PlannerResult, str]:
    """The operator sends `text` while the model writes `first_reply`; returns the run and what the model saw next."""
    inputs: queue.Queue[Any] = queue.Queue()
    seen: list[str] = []

    def first(body: dict[str, Any]) -> Reply:
        inputs.put(OperatorMessage(text))
        inputs.join()  # the planner's inbox holds it now
        return first_reply

    def then(body: dict[str, Any]) -> Reply:
        seen.append(seen_by(body))
        return Reply([robot("finish", status="failure", summary="Done as the operator said.")])

    model_server.script(first, then)
    model_server.when_exhausted = Reply([Text("Done.")])
    result = solve(model_server, toolkit, input_queue=inputs)

    assert result.status is PlannerStatus.FINISHED
    assert f"Message from the operator: {text}" in seen[0]
    return result, seen[0]


def operator_message_in_next_tool_result(model_server: FakeModelServer, toolkit: ToyToolkit, solve: Solve,
                                         robot: Robot, last_tool_text: LastText) -> PlannerResult:
    """A message sent while the model thinks reaches it inside the next tool result."""
    return _operator_message_reaches_the_model(model_server, toolkit, solve, robot, Reply([robot("get_state")]),
                                               "use the blue block instead", last_tool_text)[0]


def operator_message_after_turn_end(model_server: FakeModelServer, toolkit: ToyToolkit, solve: Solve,
                                    robot: Robot, last_input: LastText) -> str:
    """A message that arrives as the model ends its turn is sent as a new turn; returns what the model saw."""
    return _operator_message_reaches_the_model(model_server, toolkit, solve, robot, Reply([Text("I will wait.")]),
                                               "please finish now", last_input)[1]


def nudged_once_then_ended(model_server: FakeModelServer, toolkit: ToyToolkit, solve: Solve,
                           last_input: LastText) -> None:
    """A model that ends its turn unfinished is nudged once; ending again ends the run."""
    seen: dict[str, Any] = {}

    def second(body: dict[str, Any]) -> Reply:
        seen["input"] = last_input(body)
        return Reply([Text("Still nothing to do.")])

    model_server.script(Reply([Text("Nothing to do.")]), second)
    result = solve(model_server, toolkit)

    assert result.status is PlannerStatus.MODEL_ENDED and result.finish_result is None
    assert NUDGE_TEXT in seen["input"]
    assert len(model_server.model_requests) == 2


def wall_time_stops_a_long_motion(model_server: FakeModelServer, tmp_path: Path, solve: Solve, robot: Robot) -> None:
    toolkit = make_toolkit(tmp_path, speed_m_s=0.005)  # 0.3 m takes 60 s
    model_server.script(Reply([robot("move_to", x_m=0.0, y_m=0.3, z_m=0.2)]))
    model_server.when_exhausted = Reply([Text("Stopped.")])
    try:
        result = solve(model_server, toolkit, max_wall_time_s=8)
        assert result.status is PlannerStatus.TIME_LIMIT and "max_wall_time_s" in result.stop_reason
        # Whether or not the CLI got to start the motion in time, the arm is not moving any more.
        assert toolkit.robot.stops == 1 or not toolkit.robot.moving.is_set()
        assert toolkit.robot.gripper_xyz[0] > 0.0
    finally:
        toolkit.close()


def puts_the_red_block_in_the_bin(model_server: FakeModelServer, toolkit: ToyToolkit, solve: Solve, robot: Robot,
                                  first: Callable[[dict[str, Any]], Reply],
                                  after_move: Callable[[dict[str, Any]], Reply]) -> PlannerResult:
    """The whole toy task: `first` answers the opening request (with the move to the red block) and
    `after_move` the one after it (with the grasp), so each CLI test can look at its own wire format there."""
    model_server.script(
        first, after_move,
        Reply([robot("move_to", x_m=0.5, y_m=0.1, z_m=0.1)]),
        Reply([robot("release")]),
        Reply([robot("finish", status="success", summary="The red block is in the bin.")]),
    )
    model_server.when_exhausted = Reply([Text("Done.")])  # the CLI may ask once more after the finish
    result = solve(model_server, toolkit)

    assert result.status is PlannerStatus.FINISHED, (result.stop_reason, result.error)
    assert result.finish_result["status"] == "success"
    assert toolkit.robot.in_bin("red") and toolkit.solved()
    assert result.turns == 5 and result.usage.input_tokens > 0
    return result


def tool_errors_reach_the_model(model_server: FakeModelServer, toolkit: ToyToolkit, solve: Solve, robot: Robot,
                                last_result: Callable[[dict[str, Any]], Any]) -> tuple[PlannerResult, Any, Any]:
    """A move out of reach, then a grasp on nothing: returns the run and what `last_result` read of each
    tool's answer, for the caller to check against its CLI's way of marking an error."""
    seen: list[Any] = []

    def after_bad_arguments(body: dict[str, Any]) -> Reply:
        seen.append(last_result(body))
        return Reply([robot("grasp")])

    def after_grasp(body: dict[str, Any]) -> Reply:
        seen.append(last_result(body))
        return Reply([robot("finish", status="failure", summary="Nothing to grasp.")])

    model_server.script(Reply([robot("move_to", x_m=5.0, y_m=0.1)]), after_bad_arguments, after_grasp)
    model_server.when_exhausted = Reply([Text("Done.")])
    result = solve(model_server, toolkit)

    assert result.status is PlannerStatus.FINISHED
    assert toolkit.robot.gripper_xyz == [0.3, 0.3, 0.2]  # the bad target never moved the arm
    bad, grasp = seen
    return result, bad, grasp
