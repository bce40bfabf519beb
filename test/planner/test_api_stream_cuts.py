"""The api planner never acts on a reply whose stream broke off (issue 12): the real anthropic SDK
against the scripted model server cutting its SSE stream, driving the toy robot's toolkit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakes import Cut, Failure, FakeModelServer, Reply, Text, ToolUse

from robots.toy.runtime import ToyWorld
from robots.toy.toolkit import ToyToolkit
from rpent.planner.api import ApiPlanner
from rpent.planner.base import PlannerResult, PlannerStatus
from rpent.record.steps import read_steps

pytestmark = pytest.mark.timeout(60)

ABOVE_RED = {"x_m": 0.1, "y_m": 0.45, "z_m": 0.04}  # the fingertips on the red block's top
# The arguments are streamed in 12-character pieces after an empty first one, so the fourth
# input_json_delta ends the third piece: the height is cut from 0.04 to a plausible 0.0.
CUT_ARGS = Cut("input_json_delta", nth=4)
PARTIAL_ARGS = '{"x_m": 0.1, "y_m": 0.45, "z_m": 0.0'
FINISH = ToolUse("finish", {"status": "success", "summary": "lowered onto the red block"})

CUT_FORMS = {
    "connection_dropped_mid_arguments": CUT_ARGS,
    "stream_ended_inside_a_block": Cut("input_json_delta", nth=4, drop_connection=False),
    "stream_ended_without_message_stop": Cut("message_delta", drop_connection=False),
}


@pytest.fixture
def toolkit(tmp_path: Path) -> Any:
    kit = ToyToolkit(robot=ToyWorld(speed_m_s=5.0), output_dir=tmp_path / "run")
    yield kit
    kit.close()


def solve(server: FakeModelServer, toolkit: ToyToolkit, **options: Any) -> PlannerResult:
    planner = ApiPlanner(model="fake-model", base_url=server.base_url, api_key="test-key",
                         retry_base_delay_s=0.01, **options)
    return planner.solve(system_prompt="You drive a toy arm.", user_message="Lower onto the red block, then finish.",
                         toolkit=toolkit, max_turns=10)


def executed(toolkit: ToyToolkit) -> list[tuple[str, dict[str, Any]]]:
    path = toolkit.output_dir / "steps.jsonl"
    return [(s["tool"], s["arguments"]) for s in read_steps(path)] if path.exists() else []


def discarded(result: PlannerResult) -> list[dict[str, Any]]:
    return [e for e in result.transcript if e["role"] == "discarded"]


def lowering(cut: Cut | None = None, tool_id: str = "toolu_lower") -> Reply:
    return Reply([Text("Lowering onto the red block."), ToolUse("move_to", ABOVE_RED, id=tool_id)], cut=cut)


@pytest.mark.parametrize("cut", CUT_FORMS.values(), ids=CUT_FORMS.keys())
def test_a_cut_tool_call_is_discarded_and_only_the_retried_whole_reply_runs(
    model_server: FakeModelServer, toolkit: ToyToolkit, cut: Cut
) -> None:
    first_messages: list[Any] = []

    def cut_reply(body: dict[str, Any]) -> Reply:
        first_messages.append(body["messages"])
        return lowering(cut, tool_id="toolu_cut")

    def retried(body: dict[str, Any]) -> Reply:
        # The retry is the same request again: nothing of the cut reply entered the conversation.
        assert body["messages"] == first_messages[0]
        return lowering()

    def after_move(body: dict[str, Any]) -> Reply:
        assert "toolu_cut" not in str(body["messages"])
        return Reply([FINISH])

    model_server.script(cut_reply, retried, after_move)
    result = solve(model_server, toolkit)

    assert result.status is PlannerStatus.FINISHED, (result.stop_reason, result.error)
    assert executed(toolkit) == [("move_to", ABOVE_RED), ("finish", FINISH.input)]
    assert toolkit.robot.gripper_xyz == pytest.approx([0.1, 0.45, 0.04])
    assert result.turns == 2 and len(model_server.model_requests) == 3
    (entry,) = discarded(result)
    assert "cut off" in entry["reason"]
    text, call = entry["content"]
    assert text == {"type": "text", "text": "Lowering onto the red block.", "complete": True}
    assert call["type"] == "tool_use" and call["id"] == "toolu_cut" and call["name"] == "move_to"
    if cut.after == "input_json_delta":
        assert call["partial_json"] == PARTIAL_ARGS and call["complete"] is False
    # Where it happened: the discarded entry sits between the request and the retried reply.
    roles = [e["role"] for e in result.transcript]
    assert roles[:4] == ["system", "user", "discarded", "assistant"]


def test_a_cut_text_reply_is_retried_not_taken_as_the_end_of_the_turn(model_server: FakeModelServer,
                                                                      toolkit: ToyToolkit) -> None:
    first_messages: list[Any] = []

    def cut_text(body: dict[str, Any]) -> Reply:
        first_messages.append(body["messages"])
        return Reply([Text("I have looked at the table and I will now lower the gripper.")],
                     cut=Cut("text_delta", nth=2, drop_connection=False))

    def retried(body: dict[str, Any]) -> Reply:
        assert body["messages"] == first_messages[0]  # no end-of-turn nudge: the turn had not ended
        return Reply([FINISH])

    model_server.script(cut_text, retried)
    result = solve(model_server, toolkit)

    assert result.status is PlannerStatus.FINISHED, (result.stop_reason, result.error)
    assert executed(toolkit) == [("finish", FINISH.input)] and result.turns == 1
    (entry,) = discarded(result)
    assert entry["content"] == [{"type": "text", "text": "I have looked at the table and I",
                                 "complete": False}]


def test_a_reply_cut_on_every_attempt_ends_the_run_with_an_error_and_nothing_runs(model_server: FakeModelServer,
                                                                                 toolkit: ToyToolkit) -> None:
    model_server.script(*[lowering(CUT_ARGS) for _ in range(3)])
    result = solve(model_server, toolkit, max_retries=2)

    assert result.status is PlannerStatus.ERROR
    assert "the model's output was cut off" in result.stop_reason
    assert "cut off" in (result.error or "")
    assert executed(toolkit) == [] and toolkit.robot.gripper_xyz == [0.3, 0.3, 0.2]
    assert len(model_server.model_requests) == 3 and result.turns == 0
    assert [e["content"][1]["partial_json"] for e in discarded(result)] == [PARTIAL_ARGS] * 3


def test_cuts_and_connection_errors_share_one_retry_budget(model_server: FakeModelServer,
                                                           toolkit: ToyToolkit) -> None:
    model_server.script(Failure(529), lowering(CUT_ARGS), lowering(CUT_ARGS))
    result = solve(model_server, toolkit, max_retries=2)

    assert result.status is PlannerStatus.ERROR and "cut off" in result.stop_reason
    assert len(model_server.model_requests) == 3 and executed(toolkit) == []
