"""The api planner, driven through the real anthropic SDK against the scripted model server."""

from __future__ import annotations

import base64
import queue
import threading
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pytest
from fakes import Failure, FakeModelServer, Reply, Text, ToolUse
from pydantic import Field

from rpent.planner.api import NUDGE_TEXT, ApiPlanner
from rpent.planner.base import AbortRequest, OperatorMessage, PlannerStatus, build_planner
from rpent.tools import ToolContext, Toolkit, ToolResult, finish_payload, readonly, tool
from rpent.tools.images import encode_png

pytestmark = pytest.mark.timeout(60)

CAMERA = np.zeros((6, 8, 3), dtype=np.uint8)
CAMERA[:, :4] = (255, 0, 0)


@tool
def move_by(dx_m: Annotated[float, Field(ge=-0.1, le=0.1)], *, ctx: ToolContext) -> dict:
    """Move the toy arm along x.

    Args:
        dx_m: Offset in metres.
    """
    ctx.state.setdefault("calls", []).append(("move_by", dx_m))
    ctx.state["x"] = ctx.state.get("x", 0.0) + dx_m
    return {"x_m": ctx.state["x"]}


@tool
@readonly
def look(*, ctx: ToolContext) -> ToolResult:
    """Take a picture with the toy camera."""
    ctx.state.setdefault("calls", []).append(("look",))
    return ToolResult(data={"camera": "front"}, images=[encode_png(CAMERA)])


@tool
def jam(*, ctx: ToolContext) -> dict:
    """A gripper command that always fails."""
    ctx.state.setdefault("calls", []).append(("jam",))
    raise RuntimeError("gripper jammed")


@tool
def hold_position(*, ctx: ToolContext) -> dict:
    """Hold still until cancelled (a long motion)."""
    ctx.state["holding"].set()
    cancelled = ctx.wait_cancelled(30.0)
    ctx.state["hold_cancelled"] = cancelled
    ctx.check_cancelled()
    return {"held": True}


@tool
def finish(status: str, summary: str, *, ctx: ToolContext) -> dict:
    """End the task.

    Args:
        status: success or failure.
        summary: What happened.
    """
    ctx.state.setdefault("calls", []).append(("finish", status))
    return finish_payload(status=status, summary=summary, operator_notes=ctx.state.get("notes"))


class ToyToolkit(Toolkit):
    tools = (move_by, look, jam, hold_position, finish)


@pytest.fixture
def toolkit(tmp_path: Path) -> Any:
    kit = ToyToolkit(output_dir=tmp_path / "run", state={"holding": threading.Event()})
    yield kit
    kit.close()


def planner(server: FakeModelServer, **options: Any) -> ApiPlanner:
    options.setdefault("api_key", "test-key")
    options.setdefault("retry_base_delay_s", 0.01)
    return ApiPlanner(model="fake-model", base_url=server.base_url, **options)


def solve(server: FakeModelServer, toolkit: Toolkit, *, max_turns: int = 10, input_queue: Any = None,
          **options: Any) -> Any:
    return planner(server, **options).solve(
        system_prompt="You drive a toy arm.", user_message="Move right, look, then finish.",
        toolkit=toolkit, max_turns=max_turns, input_queue=input_queue,
    )


def last_user_blocks(body: dict) -> list[dict]:
    """The newest user turn's blocks, without the moving cache breakpoint (tested on its own)."""
    message = body["messages"][-1]
    assert message["role"] == "user"
    return [{k: v for k, v in block.items() if k != "cache_control"} for block in message["content"]]


def finish_turn(summary: str = "done") -> ToolUse:
    return ToolUse("finish", {"status": "success", "summary": summary})


def test_planner_runs_scripted_tools_in_order_and_stops_at_finish(model_server: FakeModelServer,
                                                                   toolkit: ToyToolkit) -> None:
    def after_move(body: dict) -> Reply:
        (result,) = last_user_blocks(body)
        assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_move"
        assert result["content"][0]["text"] == '{"x_m": 0.05}' and "is_error" not in result
        return Reply([Text("Now I look."), ToolUse("look", id="toolu_look")])

    def after_look(body: dict) -> Reply:
        (result,) = last_user_blocks(body)
        image = result["content"][1]
        assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
        assert base64.b64decode(image["source"]["data"]) == encode_png(CAMERA)
        return Reply([finish_turn("moved and looked")])

    model_server.script(Reply([ToolUse("move_by", {"dx_m": 0.05}, id="toolu_move")]), after_move, after_look)
    result = solve(model_server, toolkit)

    assert result.status is PlannerStatus.FINISHED and result.stop_reason == "finish accepted"
    assert result.finish_result == {"status": "success", "summary": "moved and looked", "operator_notes": None}
    assert toolkit.state["calls"] == [("move_by", 0.05), ("look",), ("finish", "success")]
    assert result.turns == 3 and len(model_server.model_requests) == 3
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    first = model_server.model_requests[0].body
    assert first["model"] == "fake-model" and first["stream"] is True
    assert [t["name"] for t in first["tools"]][:5] == ["move_by", "look", "jam", "hold_position", "finish"]
    assert "read_image" in [t["name"] for t in first["tools"]]
    assert first["tools"][0]["input_schema"]["properties"]["dx_m"]["maximum"] == 0.1


def test_transcript_keeps_image_paths_not_image_bytes(model_server: FakeModelServer, toolkit: ToyToolkit) -> None:
    model_server.script(Reply([ToolUse("look")]), Reply([finish_turn()]))
    result = solve(model_server, toolkit)
    tool_results = [b for m in result.transcript if m["role"] == "user" and isinstance(m["content"], list)
                    for b in m["content"] if b.get("type") == "tool_result"]
    (image,) = [c for c in tool_results[0]["content"] if c["type"] == "image"]
    assert Path(image["path"]).read_bytes() == encode_png(CAMERA)
    assert "source" not in image
    assert result.transcript[0] == {"role": "system", "content": "You drive a toy arm."}


def test_tool_errors_reach_the_model_flagged_is_error(model_server: FakeModelServer, toolkit: ToyToolkit) -> None:
    def check(body: dict) -> Reply:
        jammed, out_of_range = last_user_blocks(body)
        assert jammed["is_error"] is True and "gripper jammed" in jammed["content"][0]["text"]
        assert out_of_range["is_error"] is True and "dx_m" in out_of_range["content"][0]["text"]
        return Reply([finish_turn()])

    model_server.script(Reply([ToolUse("jam"), ToolUse("move_by", {"dx_m": 5.0})]), check)
    result = solve(model_server, toolkit)
    assert result.status is PlannerStatus.FINISHED
    assert "x" not in toolkit.state  # the out-of-range move never ran


def test_parallel_tool_uses_are_answered_in_one_user_turn_in_order(model_server: FakeModelServer,
                                                                   toolkit: ToyToolkit) -> None:
    def check(body: dict) -> Reply:
        blocks = last_user_blocks(body)
        assert [b["tool_use_id"] for b in blocks] == ["toolu_a", "toolu_b", "toolu_c"]
        assert body["messages"][-2]["role"] == "assistant" and len(body["messages"]) == 3
        return Reply([finish_turn()])

    model_server.script(Reply([Text("three at once"), ToolUse("move_by", {"dx_m": 0.01}, id="toolu_a"),
                               ToolUse("look", id="toolu_b"), ToolUse("move_by", {"dx_m": 0.02}, id="toolu_c")]),
                        check)
    result = solve(model_server, toolkit)
    assert result.status is PlannerStatus.FINISHED
    assert toolkit.state["calls"][0] == ("move_by", 0.01) and ("look",) in toolkit.state["calls"]
    assert toolkit.state["x"] == pytest.approx(0.03)


def test_max_turns_stops_the_run_after_that_many_model_turns(model_server: FakeModelServer,
                                                             toolkit: ToyToolkit) -> None:
    model_server.script(*[Reply([ToolUse("move_by", {"dx_m": 0.01})]) for _ in range(3)])
    result = solve(model_server, toolkit, max_turns=2)
    assert result.status is PlannerStatus.TURN_LIMIT and result.turns == 2
    assert len(model_server.model_requests) == 2 and result.finish_result is None
    model_server.script()  # the third scripted turn stays unused
    assert model_server.remaining_turns == 1


@pytest.mark.parametrize("failures", [[Failure(429)], [Failure(529), Failure(500)], [Failure(529, mid_stream=True)]],
                         ids=["rate_limited", "overloaded_then_server_error", "overloaded_mid_stream"])
def test_model_errors_are_retried_and_the_run_continues(model_server: FakeModelServer, toolkit: ToyToolkit,
                                                        failures: list[Failure]) -> None:
    model_server.script(*failures, Reply([finish_turn()]))
    result = solve(model_server, toolkit)
    assert result.status is PlannerStatus.FINISHED and result.turns == 1
    assert len(model_server.model_requests) == len(failures) + 1


def test_retries_give_up_after_max_retries_with_status_error(model_server: FakeModelServer,
                                                             toolkit: ToyToolkit) -> None:
    model_server.script(Failure(529), Failure(529), Failure(529))
    result = solve(model_server, toolkit, max_retries=2)
    assert result.status is PlannerStatus.ERROR and "529" in (result.error or "")
    assert len(model_server.model_requests) == 3


def test_client_errors_are_not_retried(model_server: FakeModelServer, toolkit: ToyToolkit) -> None:
    model_server.script(Failure(400, message="messages: bad"))
    result = solve(model_server, toolkit)
    assert result.status is PlannerStatus.ERROR and "messages: bad" in (result.error or "")
    assert len(model_server.model_requests) == 1


def test_operator_message_reaches_the_model_at_the_next_turn_boundary(model_server: FakeModelServer,
                                                                     toolkit: ToyToolkit) -> None:
    inbox: queue.Queue = queue.Queue()

    def first(body: dict) -> Reply:
        inbox.put(OperatorMessage("the cube moved left"))
        inbox.join()  # the planner has taken the message while this model turn is still open
        return Reply([ToolUse("move_by", {"dx_m": 0.01}, id="toolu_1")])

    def second(body: dict) -> Reply:
        result, note = last_user_blocks(body)
        assert result["tool_use_id"] == "toolu_1"
        assert note == {"type": "text", "text": "Message from the operator: the cube moved left"}
        return Reply([finish_turn()])

    model_server.script(first, second)
    result = solve(model_server, toolkit, input_queue=inbox)
    assert result.status is PlannerStatus.FINISHED
    assert "operator" not in str(model_server.model_requests[0].body["messages"])


def test_operator_message_after_end_turn_restarts_the_model(model_server: FakeModelServer,
                                                            toolkit: ToyToolkit) -> None:
    inbox: queue.Queue = queue.Queue()

    def first(body: dict) -> Reply:
        inbox.put(OperatorMessage("please finish"))
        inbox.join()
        return Reply([Text("Waiting for instructions.")])

    def second(body: dict) -> Reply:
        assert last_user_blocks(body) == [{"type": "text", "text": "Message from the operator: please finish"}]
        return Reply([finish_turn()])

    model_server.script(first, second)
    assert solve(model_server, toolkit, input_queue=inbox).status is PlannerStatus.FINISHED


def test_abort_cancels_the_running_tool_and_ends_aborted(model_server: FakeModelServer,
                                                         toolkit: ToyToolkit) -> None:
    inbox: queue.Queue = queue.Queue()

    def abort_when_holding() -> None:
        assert toolkit.state["holding"].wait(20)
        inbox.put(AbortRequest("operator pressed stop"))

    aborter = threading.Thread(target=abort_when_holding)
    aborter.start()
    model_server.script(Reply([ToolUse("hold_position")]))
    result = solve(model_server, toolkit, input_queue=inbox)
    aborter.join(10)

    assert result.status is PlannerStatus.ABORTED and "operator pressed stop" in result.stop_reason
    # The tool saw the cancel and had returned before solve() did.
    assert toolkit.state["hold_cancelled"] is True
    assert len(model_server.model_requests) == 1 and result.finish_result is None


def test_abort_during_a_model_request_ends_without_waiting_for_the_reply(model_server: FakeModelServer,
                                                                         toolkit: ToyToolkit) -> None:
    inbox: queue.Queue = queue.Queue()
    release = threading.Event()

    def first(body: dict) -> Reply:
        inbox.put(AbortRequest())
        return Reply([ToolUse("move_by", {"dx_m": 0.01})], hold=release)

    model_server.script(first)
    try:
        result = solve(model_server, toolkit, input_queue=inbox)
    finally:
        release.set()
    assert result.status is PlannerStatus.ABORTED and "calls" not in toolkit.state


def test_end_turn_without_finish_is_nudged_once_then_reported(model_server: FakeModelServer,
                                                              toolkit: ToyToolkit) -> None:
    def nudged(body: dict) -> Reply:
        assert last_user_blocks(body) == [{"type": "text", "text": NUDGE_TEXT}]
        return Reply([Text("Still nothing to do.")])

    model_server.script(Reply([Text("I think I am done.")]), nudged)
    result = solve(model_server, toolkit)
    assert result.status is PlannerStatus.MODEL_ENDED and result.turns == 2


def test_a_nudge_after_an_empty_reply_is_recorded_in_the_user_entry_it_joins(model_server: FakeModelServer,
                                                                            toolkit: ToyToolkit) -> None:
    model_server.script(Reply([]), Reply([finish_turn()]))
    result = solve(model_server, toolkit)
    assert result.status is PlannerStatus.FINISHED
    user, empty = result.transcript[1:3]
    assert empty == {"role": "assistant", "content": [], "stop_reason": "end_turn"}
    assert user["role"] == "user" and user["content"][-1] == {"type": "text", "text": NUDGE_TEXT}


def test_refusal_stops_the_run(model_server: FakeModelServer, toolkit: ToyToolkit) -> None:
    model_server.script(Reply([Text("I can't help with that.")], stop_reason="refusal"))
    result = solve(model_server, toolkit)
    assert result.status is PlannerStatus.REFUSED and result.turns == 1


def test_tool_call_cut_off_by_max_tokens_is_not_executed(model_server: FakeModelServer,
                                                         toolkit: ToyToolkit) -> None:
    def check(body: dict) -> Reply:
        (result,) = last_user_blocks(body)
        assert result["is_error"] is True and "output token limit" in result["content"][0]["text"]
        return Reply([finish_turn()])

    model_server.script(Reply([ToolUse("move_by", {"dx_m": 0.1}, id="toolu_cut")], stop_reason="max_tokens"), check)
    assert solve(model_server, toolkit).status is PlannerStatus.FINISHED
    assert "x" not in toolkit.state


def test_pause_turn_sends_the_conversation_back_unchanged(model_server: FakeModelServer,
                                                          toolkit: ToyToolkit) -> None:
    def resumed(body: dict) -> Reply:
        last = body["messages"][-1]
        assert last["role"] == "assistant"
        assert [{k: v for k, v in b.items() if k != "cache_control"} for b in last["content"]] == [
            {"type": "text", "text": "thinking..."}]
        return Reply([finish_turn()])

    model_server.script(Reply([Text("thinking...")], stop_reason="pause_turn"), resumed)
    assert solve(model_server, toolkit).status is PlannerStatus.FINISHED


def test_token_budget_stops_the_run(model_server: FakeModelServer, toolkit: ToyToolkit) -> None:
    model_server.script(Reply([ToolUse("move_by", {"dx_m": 0.01})], usage={"input_tokens": 900, "output_tokens": 200}))
    result = solve(model_server, toolkit, max_total_tokens=1000)
    assert result.status is PlannerStatus.TOKEN_LIMIT and result.usage.total_tokens == 1100


def test_wall_time_limit_cancels_a_running_tool(model_server: FakeModelServer, toolkit: ToyToolkit) -> None:
    model_server.script(Reply([ToolUse("hold_position")]))
    result = solve(model_server, toolkit, max_wall_time_s=0.5)
    assert result.status is PlannerStatus.TIME_LIMIT and toolkit.state["hold_cancelled"] is True


def test_system_prompt_tools_and_newest_block_are_marked_for_caching(model_server: FakeModelServer,
                                                                     toolkit: ToyToolkit) -> None:
    model_server.script(Reply([ToolUse("move_by", {"dx_m": 0.01})]), Reply([finish_turn()]))
    result = solve(model_server, toolkit)
    body = model_server.model_requests[1].body
    ephemeral = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "You drive a toy arm.", "cache_control": ephemeral}]
    assert body["tools"][-1]["cache_control"] == ephemeral
    assert all("cache_control" not in t for t in body["tools"][:-1])
    assert body["messages"][-1]["content"][-1]["cache_control"] == ephemeral
    assert "cache_control" not in body["messages"][0]["content"][-1]  # the breakpoint moves
    assert "cache_control" not in str(result.transcript)


def test_streamed_text_is_passed_to_on_text(model_server: FakeModelServer, toolkit: ToyToolkit) -> None:
    fragments: list[str] = []
    sentence = "I will move the arm to the right by five centimetres now."
    model_server.script(Reply([Text(sentence), finish_turn()]))
    solve(model_server, toolkit, on_text=fragments.append)
    assert "".join(fragments) == sentence and len(fragments) > 1


def test_gateway_endpoint_with_bearer_key_from_a_named_variable(model_server: FakeModelServer, toolkit: ToyToolkit,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_GATEWAY_KEY", "gw-secret")
    model_server.script(Reply([finish_turn()]))
    gateway = ApiPlanner(model="lab/claude-proxy", base_url=model_server.base_url, api_key_env="LAB_GATEWAY_KEY",
                         bearer_auth=True)
    result = gateway.solve(system_prompt="s", user_message="u", toolkit=toolkit, max_turns=3)
    assert result.status is PlannerStatus.FINISHED
    request = model_server.model_requests[0]
    assert request.headers["authorization"] == "Bearer gw-secret" and "x-api-key" not in request.headers
    assert request.body["model"] == "lab/claude-proxy"


def test_bad_options_are_rejected_naming_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ValueError, match="api_key_env: environment variable NO_SUCH_KEY_VAR"):
        ApiPlanner(api_key_env="NO_SUCH_KEY_VAR")
    with pytest.raises(ValueError, match="max_wall_time_s"):
        ApiPlanner(api_key="k", max_wall_time_s=-1)
    with pytest.raises(ValueError, match="max_turns"):
        ApiPlanner(api_key="k").solve(system_prompt="s", user_message="u", toolkit=None, max_turns=0)  # type: ignore[arg-type]


@pytest.mark.parametrize(("option", "value", "rule"), [
    ("max_output_tokens", 0, ">= 1"), ("max_retries", -1, ">= 0"), ("end_turn_nudges", True, ">= 0"),
    ("max_retries", 2.0, ">= 0"),
])
def test_a_count_option_takes_only_a_whole_number_in_range(option: str, value: Any, rule: str) -> None:
    with pytest.raises(ValueError, match=f"^{option}: must be an integer {rule}, got {value!r}$"):
        ApiPlanner(api_key="k", **{option: value})


def test_build_planner_creates_the_api_planner_by_name() -> None:
    created = build_planner("api", api_key="k", model="m")
    assert isinstance(created, ApiPlanner) and created.model == "m"
