"""RobotAgent never acts on a reply whose stream broke off (issue 12): the real anthropic SDK against
the scripted model server cutting its SSE stream, the toy robot served over MCP HTTP in-process."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import Cut, FakeModelServer, Reply, Text, ToolUse
from mcp_support import write_mcp_json

from robots.toy.runtime import ToyWorld
from robots.toy.toolkit import ToyToolkit
from rpent.mcp import McpHttpServer, RobotAgent, build_mcp_server
from rpent.record.steps import read_steps

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

ABOVE_RED = {"x_m": 0.1, "y_m": 0.45, "z_m": 0.04}
# Arguments stream in 12-character pieces after an empty first one: the fourth input_json_delta
# leaves the height cut from 0.04 to 0.0.
CUT_ARGS = Cut("input_json_delta", nth=4)
PARTIAL_ARGS = '{"x_m": 0.1, "y_m": 0.45, "z_m": 0.0'
SENTENCE = "I have looked at the table and I will now lower the gripper."
FAST_RETRY = {"retry_base_delay_s": 0.01}


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[tuple[ToyToolkit, Path]]:
    """The toy robot's toolkit (watched by the test) and a .mcp.json naming its HTTP server."""
    toolkit = ToyToolkit(robot=ToyWorld(speed_m_s=5.0), output_dir=tmp_path / "run")
    try:
        with McpHttpServer(build_mcp_server(toolkit), port=0) as http:
            yield toolkit, write_mcp_json(tmp_path, {"toy": {"type": "http", "url": http.url}})
    finally:
        toolkit.close(timeout=10)


def executed(toolkit: ToyToolkit) -> list[tuple[str, dict[str, Any]]]:
    path = toolkit.output_dir / "steps.jsonl"
    return [(s["tool"], s["arguments"]) for s in read_steps(path)] if path.exists() else []


def chat(server: FakeModelServer, config: Path, *messages: str, **options: Any) -> list[Any]:
    async def main() -> list[Any]:
        agent = RobotAgent(model="fake-model", mcp_config_path=config, base_url=server.base_url,
                           api_key="test-key", **FAST_RETRY, **options)
        async with agent:
            return [await agent.chat_result(message) for message in messages]

    return asyncio.run(main())


def lowering(cut: Cut | None = None, tool_id: str = "toolu_lower") -> Reply:
    return Reply([Text("Lowering onto the red block."), ToolUse("move_to", ABOVE_RED, id=tool_id)], cut=cut)


@pytest.mark.parametrize("cut", [CUT_ARGS, Cut("message_delta", drop_connection=False)],
                         ids=["connection_dropped_mid_arguments", "stream_ended_without_message_stop"])
def test_a_cut_tool_call_is_discarded_and_only_the_retried_whole_reply_runs(
    model_server: FakeModelServer, toy: tuple[ToyToolkit, Path], cut: Cut
) -> None:
    toolkit, config = toy
    first_messages: list[Any] = []

    def cut_reply(body: dict[str, Any]) -> Reply:
        first_messages.append(body["messages"])
        return lowering(cut, tool_id="toolu_cut")

    def retried(body: dict[str, Any]) -> Reply:
        assert body["messages"] == first_messages[0]  # nothing of the cut reply entered the history
        return lowering()

    def after_move(body: dict[str, Any]) -> Reply:
        assert "toolu_cut" not in str(body["messages"])
        return Reply([Text("Lowered.")])

    model_server.script(cut_reply, retried, after_move)
    (result,) = chat(model_server, config, "Lower onto the red block.")

    assert result.text == "Lowered." and result.stop_reason == "end_turn"
    assert [(r.name, r.arguments) for r in result.tool_calls] == [("move_to", ABOVE_RED)]
    assert executed(toolkit) == [("move_to", ABOVE_RED)]
    assert toolkit.robot.gripper_xyz == pytest.approx([0.1, 0.45, 0.04])
    assert result.iterations == 2 and len(model_server.model_requests) == 3
    (entry,) = result.discarded
    assert "cut off" in entry["reason"]
    text, call = entry["content"]
    assert text["text"] == "Lowering onto the red block."
    assert call["type"] == "tool_use" and call["id"] == "toolu_cut" and call["name"] == "move_to"
    if cut is CUT_ARGS:
        assert call["partial_json"] == PARTIAL_ARGS and call["complete"] is False


def test_a_cut_text_reply_is_retried_not_taken_as_the_end_of_the_turn(model_server: FakeModelServer,
                                                                      toy: tuple[ToyToolkit, Path]) -> None:
    toolkit, config = toy
    model_server.script(Reply([Text(SENTENCE)], cut=Cut("text_delta", nth=2)), Reply([Text(SENTENCE)]))
    (result,) = chat(model_server, config, "What will you do?")

    assert result.text == SENTENCE and result.stop_reason == "end_turn"
    assert len(model_server.model_requests) == 2
    assert model_server.model_requests[1].body["messages"] == model_server.model_requests[0].body["messages"]
    (entry,) = result.discarded
    assert entry["content"] == [{"type": "text", "text": "I have looked at the table and I", "complete": False}]
    assert executed(toolkit) == []


def test_a_reply_cut_on_every_attempt_ends_the_chat_cut_off_and_nothing_runs(model_server: FakeModelServer,
                                                                            toy: tuple[ToyToolkit, Path]) -> None:
    toolkit, config = toy

    def next_chat(body: dict[str, Any]) -> Reply:
        # The history stayed valid: one user turn holding both messages, no trace of the cut replies.
        assert [m["role"] for m in body["messages"]] == ["user"]
        assert [b["text"] for b in body["messages"][0]["content"]] == ["Lower onto the red block.", "Try again."]
        return Reply([Text("Ready.")])

    model_server.script(*[lowering(CUT_ARGS) for _ in range(3)], next_chat)
    cut_off, after = chat(model_server, config, "Lower onto the red block.", "Try again.", max_retries=2)

    assert cut_off.stop_reason == "output_cut_off" and "cut off" in cut_off.text
    assert cut_off.tool_calls == [] and executed(toolkit) == []
    assert toolkit.robot.gripper_xyz == [0.3, 0.3, 0.2]
    assert [e["content"][1]["partial_json"] for e in cut_off.discarded] == [PARTIAL_ARGS] * 3
    assert after.text == "Ready." and len(model_server.model_requests) == 4
