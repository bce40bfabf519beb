"""The claude_code planner: the real Claude Code CLI (bundled in claude-agent-sdk) drives the toy robot
through the planner's MCP bridge, against the scripted model server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_cli_cases import (
    abort_mid_motion,
    called,
    nudged_once_then_ended,
    operator_message_after_turn_end,
    operator_message_in_next_tool_result,
    puts_the_red_block_in_the_bin,
    solver,
    text_of,
    tool_errors_reach_the_model,
    wall_time_stops_a_long_motion,
)
from fakes import Failure, FakeModelServer, Reply, Text, ToolUse

from robots.toy.toolkit import ToyToolkit
from rpent.planner.base import PlannerStatus, build_planner


def _claude_cli() -> Path | None:
    try:
        import claude_agent_sdk
    except ImportError:
        return None
    path = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    return path if path.is_file() else None


pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(_claude_cli() is None, reason="claude-agent-sdk with its bundled Claude Code CLI is not installed"),
]

ROBOT_TOOLS = {"move_to", "grasp", "release", "get_state", "capture_image", "finish"}


solve = solver("claude_code", "claude-sonnet-4-5")


def robot(name: str, **arguments: Any) -> ToolUse:
    return ToolUse(f"mcp__robot__{name}", arguments, id=f"toolu_{name}")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = body["messages"][-1]["content"]
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] if isinstance(content, list) else []


def result_text(block: dict[str, Any]) -> str:
    return text_of(block["content"], "text")


def test_claude_code_puts_the_block_in_the_bin_with_the_exact_tool_sequence(model_server: FakeModelServer,
                                                                            toolkit: ToyToolkit) -> None:
    seen: dict[str, Any] = {}

    def first(body: dict[str, Any]) -> Reply:
        names = {t["name"] for t in body["tools"]}
        seen["tools"] = names
        seen["system"] = json.dumps(body["system"])
        return Reply([Text("Going to the red block."), robot("move_to", x_m=0.1, y_m=0.45, z_m=0.04)])

    def after_move(body: dict[str, Any]) -> Reply:
        (result,) = tool_results(body)
        seen["move_result"] = result
        return Reply([robot("grasp")])

    result = puts_the_red_block_in_the_bin(model_server, toolkit, solve, robot, first, after_move)

    assert called(result) == ["move_to", "grasp", "move_to", "release", "finish"]
    # The robot's tools and the Read tool, and nothing that runs commands, writes files or browses.
    assert {f"mcp__robot__{n}" for n in ROBOT_TOOLS} <= seen["tools"]
    assert "Read" in seen["tools"] and "mcp__robot__read_image" not in seen["tools"]
    assert not seen["tools"] & {"Bash", "Write", "Edit", "WebFetch", "WebSearch", "Task"}
    assert "ROBOT-PROMPT" in seen["system"]
    # The observation after the motion: its text names the saved PNG, which exists, and the image is inline.
    move = seen["move_result"]
    assert move["tool_use_id"] == "toolu_move_to" and not move.get("is_error")
    text = result_text(move)
    png = Path(text.split("Images saved as PNG files (open them to view): ")[1].splitlines()[0].strip())
    assert png.is_file() and png.parent.parent == (toolkit.output_dir).resolve()
    assert any(c.get("type") == "image" for c in move["content"] if isinstance(c, dict))
    images = next(e for e in result.transcript if e.get("name") == "move_to")["images"]
    assert images[0] == str(png)


def test_read_opens_run_images_but_is_denied_outside_the_run_directories(model_server: FakeModelServer,
                                                                         toolkit: ToyToolkit) -> None:
    seen: dict[str, Any] = {}

    def read_png(body: dict[str, Any]) -> Reply:
        (result,) = tool_results(body)
        path = result_text(result).split("(open them to view): ")[1].splitlines()[0].strip()
        seen["png"] = path
        return Reply([ToolUse("Read", {"file_path": path}, id="toolu_read_png")])

    def read_outside(body: dict[str, Any]) -> Reply:
        (result,) = tool_results(body)
        seen["png_read"] = result
        return Reply([ToolUse("Read", {"file_path": "/etc/hostname"}, id="toolu_read_etc")])

    def read_memory(body: dict[str, Any]) -> Reply:
        (result,) = tool_results(body)
        seen["etc_read"] = result
        return Reply([ToolUse("Read", {"file_path": str(notes)}, id="toolu_read_notes")])

    def read_link(body: dict[str, Any]) -> Reply:
        (result,) = tool_results(body)
        seen["notes_read"] = result
        return Reply([ToolUse("Read", {"file_path": str(link)}, id="toolu_read_link")])

    def finish(body: dict[str, Any]) -> Reply:
        (result,) = tool_results(body)
        seen["link_read"] = result
        return Reply([robot("finish", status="failure", summary="Only looked.")])

    # A link inside the run directory to a file outside it: Claude Code alone would allow it (cwd).
    link = toolkit.output_dir / "escape.txt"
    link.symlink_to("/etc/hostname")

    notes = toolkit.memory.root / "notes.md"
    notes.parent.mkdir(parents=True, exist_ok=True)
    notes.write_text("the red block is slippery\n")
    model_server.script(Reply([robot("capture_image")]), read_png, read_outside, read_memory, read_link, finish)
    model_server.when_exhausted = Reply([Text("Done.")])
    result = solve(model_server, toolkit)

    assert result.status is PlannerStatus.FINISHED, (result.stop_reason, result.error)
    png_read = seen["png_read"]
    assert not png_read.get("is_error")
    assert any(c.get("type") == "image" for c in png_read["content"] if isinstance(c, dict))
    etc_read = seen["etc_read"]
    assert etc_read.get("is_error") and "limited to the run's directories" in result_text(etc_read)
    notes_read = seen["notes_read"]
    assert not notes_read.get("is_error") and "the red block is slippery" in result_text(notes_read)
    link_read = seen["link_read"]
    assert link_read.get("is_error") and "limited to the run's directories" in result_text(link_read)
    assert called(result) == ["capture_image", "finish"]


def test_tool_errors_reach_the_model_and_the_run_goes_on(model_server: FakeModelServer, toolkit: ToyToolkit) -> None:
    result, bad, grasp = tool_errors_reach_the_model(model_server, toolkit, solve, robot,
                                                     lambda body: tool_results(body)[0])

    assert bad.get("is_error") and "x_m" in result_text(bad)
    assert grasp.get("is_error") and "grasp closed on nothing" in result_text(grasp)
    assert called(result) == ["move_to", "grasp", "finish"]


def test_abort_mid_motion_stops_the_arm_and_ends_the_run_aborted(model_server: FakeModelServer,
                                                                 tmp_path: Path) -> None:
    abort_mid_motion(model_server, tmp_path, solve, robot)


def _last_tool_text(body: dict[str, Any]) -> str:
    (result,) = tool_results(body)
    return result_text(result)


def test_operator_message_arrives_with_the_next_tool_result(model_server: FakeModelServer,
                                                            toolkit: ToyToolkit) -> None:
    result = operator_message_in_next_tool_result(model_server, toolkit, solve, robot, _last_tool_text)
    assert [e.get("operator_messages") for e in result.transcript if e.get("name") == "get_state"] == [
        ["use the blue block instead"]]


def test_operator_message_after_the_model_ends_its_turn_starts_a_new_turn(model_server: FakeModelServer,
                                                                          toolkit: ToyToolkit) -> None:
    operator_message_after_turn_end(model_server, toolkit, solve, robot, lambda body: json.dumps(body["messages"][-1]))


def test_model_that_stops_without_finishing_is_nudged_once_then_the_run_ends(model_server: FakeModelServer,
                                                                             toolkit: ToyToolkit) -> None:
    nudged_once_then_ended(model_server, toolkit, solve, lambda body: json.dumps(body["messages"][-1]))


def test_max_turns_ends_the_run_with_turn_limit(model_server: FakeModelServer, toolkit: ToyToolkit) -> None:
    model_server.script(Reply([robot("get_state")]), Reply([robot("get_state")]))
    model_server.when_exhausted = Reply([robot("get_state")])
    result = solve(model_server, toolkit, max_turns=2)

    assert result.status is PlannerStatus.TURN_LIMIT, (result.stop_reason, result.error)
    assert called(result) == ["get_state", "get_state"]
    assert len(model_server.model_requests) == 2


def test_wall_time_budget_stops_a_long_motion(model_server: FakeModelServer, tmp_path: Path) -> None:
    wall_time_stops_a_long_motion(model_server, tmp_path, solve, robot)


def test_bad_options_are_refused_naming_the_option() -> None:
    with pytest.raises(ValueError, match="max_wall_time_s"):
        build_planner("claude_code", api_key="k", max_wall_time_s=0)
    with pytest.raises(ValueError, match="api_key_env"):
        build_planner("claude_code", api_key_env="RPENT_TEST_SURELY_UNSET")


def test_model_service_error_ends_the_run_with_status_error(model_server: FakeModelServer,
                                                            toolkit: ToyToolkit) -> None:
    # Claude Code sends a failed request once more (adjusted), so every request fails.
    model_server.when_exhausted = Failure(status=400, message="scripted bad request")
    result = solve(model_server, toolkit)

    assert result.status is PlannerStatus.ERROR and result.finish_result is None
    assert "scripted bad request" in (result.error or ""), result.error
