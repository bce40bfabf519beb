"""The codex planner: the real Codex CLI (`codex exec`) drives the toy robot through the planner's MCP
bridge, against the scripted model server (OpenAI Responses API)."""

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
from rpent.planner.codex import find_codex

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(180),
    pytest.mark.skipif(find_codex() is None, reason="no Codex CLI: run `npm ci` in the repository "
                       "(node_modules/.bin/codex), set RPENT_CODEX_BIN, or put `codex` on PATH"),
]


solve = solver("codex", "gpt-fake", "/v1")


def robot(name: str, **arguments: Any) -> ToolUse:
    return ToolUse(name, arguments, id=f"call_{name}", namespace="mcp__robot")


def outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in body["input"] if i.get("type") == "function_call_output"]


def output_text(item: dict[str, Any]) -> str:
    return text_of(item["output"], "input_text")


def test_codex_puts_the_block_in_the_bin_with_the_exact_tool_sequence(model_server: FakeModelServer,
                                                                      toolkit: ToyToolkit) -> None:
    seen: dict[str, Any] = {}

    def first(body: dict[str, Any]) -> Reply:
        seen["tools"] = body["tools"]
        seen["developer"] = [c["text"] for i in body["input"] if i.get("role") == "developer" for c in i["content"]]
        return Reply([robot("move_to", x_m=0.1, y_m=0.45, z_m=0.04)])

    def after_move(body: dict[str, Any]) -> Reply:
        seen["move_output"] = outputs(body)[-1]
        return Reply([robot("grasp")])

    result = puts_the_red_block_in_the_bin(model_server, toolkit, solve, robot, first, after_move)

    assert called(result) == ["move_to", "grasp", "move_to", "release", "finish"]
    # Our prompt replaces Codex's coding-agent instructions; the robot's tools come as one namespace,
    # without read_image, beside view_image, and no shell or sub-agent tools.
    assert seen["developer"][0] == "You drive a toy arm. ROBOT-PROMPT"
    assert not any("coding agent" in text or "skills_instructions" in text for text in seen["developer"])
    # Codex's sandbox lets it write only to the run's output and memory directories.
    (permissions,) = [t for t in seen["developer"] if "writable roots are" in t]
    roots = permissions.split("writable roots are")[1].split("\n")[0]
    assert sorted(roots.strip(" .").replace("`", "").split(", ")) == sorted(
        [str(toolkit.output_dir.resolve()), str(toolkit.memory.root)])
    (namespace,) = [t for t in seen["tools"] if t.get("type") == "namespace"]
    assert namespace["name"] == "mcp__robot"
    assert {"move_to", "grasp", "release", "get_state", "capture_image", "finish"} <= {t["name"] for t in namespace["tools"]}
    assert "read_image" not in {t["name"] for t in namespace["tools"]}
    names = {t.get("name") for t in seen["tools"]}
    assert "view_image" in names and not names & {"exec_command", "shell", "write_stdin", "multi_agent_v1"}
    # The observation: its text names the saved PNG (which exists) and the image is an input_image.
    move = seen["move_output"]
    assert move["call_id"] == "call_move_to"
    text = output_text(move)
    png = Path(text.split("Images saved as PNG files (open them to view): ")[1].splitlines()[0].strip())
    assert png.is_file() and png.parent.parent == toolkit.output_dir.resolve()
    images = [p for p in move["output"] if isinstance(p, dict) and p.get("type") == "input_image"]
    assert images and images[0]["image_url"].startswith("data:image/png;base64,")


def test_personal_codex_config_never_reaches_the_run(model_server: FakeModelServer, toolkit: ToyToolkit,
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    personal = tmp_path / "personal_codex"
    personal.mkdir()
    (personal / "config.toml").write_text('developer_instructions = "PERSONAL-SECRET"\n'
                                          '[mcp_servers.personal]\ncommand = "false"\nrequired = true\n')
    monkeypatch.setenv("CODEX_HOME", str(personal))
    seen: dict[str, Any] = {}

    def first(body: dict[str, Any]) -> Reply:
        seen["body"] = json.dumps(body)
        return Reply([robot("finish", status="failure", summary="Nothing done.")])

    model_server.script(first)
    model_server.when_exhausted = Reply([Text("Done.")])
    result = solve(model_server, toolkit)

    assert result.status is PlannerStatus.FINISHED, (result.stop_reason, result.error)
    assert "PERSONAL-SECRET" not in seen["body"] and "mcp__personal" not in seen["body"]
    assert list(personal.iterdir()) == [personal / "config.toml"]  # nothing written there either


def test_tool_errors_reach_the_model_and_the_run_goes_on(model_server: FakeModelServer, toolkit: ToyToolkit) -> None:
    result, bad, grasp = tool_errors_reach_the_model(model_server, toolkit, solve, robot,
                                                     lambda body: output_text(outputs(body)[-1]))

    assert "x_m" in bad and '"error"' in bad
    assert "grasp closed on nothing" in grasp
    assert called(result) == ["move_to", "grasp", "finish"]
    assert [bool(e.get("is_error")) for e in result.transcript if e.get("role") == "tool"] == [True, True, False]


def test_abort_mid_motion_stops_the_arm_and_ends_the_run_aborted(model_server: FakeModelServer,
                                                                 tmp_path: Path) -> None:
    abort_mid_motion(model_server, tmp_path, solve, robot)


def test_operator_message_arrives_with_the_next_tool_result(model_server: FakeModelServer,
                                                            toolkit: ToyToolkit) -> None:
    operator_message_in_next_tool_result(model_server, toolkit, solve, robot,
                                         lambda body: output_text(outputs(body)[-1]))


def test_operator_message_after_codex_ends_its_turn_is_sent_by_exec_resume(model_server: FakeModelServer,
                                                                          toolkit: ToyToolkit) -> None:
    seen = operator_message_after_turn_end(model_server, toolkit, solve, robot, lambda body: json.dumps(body["input"]))
    # The resumed session still holds the first exchange, then the operator's message.
    assert "I will wait." in seen


def test_model_that_stops_without_finishing_is_nudged_once_then_the_run_ends(model_server: FakeModelServer,
                                                                             toolkit: ToyToolkit) -> None:
    nudged_once_then_ended(model_server, toolkit, solve, lambda body: json.dumps(body["input"][-1]))


def test_max_turns_refuses_the_calls_of_the_turn_beyond_the_limit(model_server: FakeModelServer,
                                                                  toolkit: ToyToolkit) -> None:
    model_server.script(Reply([robot("get_state")]), Reply([robot("get_state")]),
                        Reply([robot("move_to", x_m=0.1, y_m=0.1)]))
    model_server.when_exhausted = Reply([Text("Stopped.")])
    result = solve(model_server, toolkit, max_turns=2)

    assert result.status is PlannerStatus.TURN_LIMIT, (result.stop_reason, result.error)
    assert toolkit.robot.gripper_xyz == [0.3, 0.3, 0.2]  # the third turn's motion never ran
    ran = [e["name"] for e in result.transcript if e.get("role") == "tool" and not e.get("is_error")]
    assert ran == ["get_state", "get_state"]


def test_wall_time_budget_stops_a_long_motion(model_server: FakeModelServer, tmp_path: Path) -> None:
    wall_time_stops_a_long_motion(model_server, tmp_path, solve, robot)


def test_config_sandboxes_codex_to_the_run_directories(tmp_path: Path) -> None:
    planner = build_planner("codex", api_key="k", base_url="http://127.0.0.1:9/v1")
    config = planner.config_toml(mcp_url="http://127.0.0.1:9/mcp", instructions_file=tmp_path / "i.md",
                                 writable_roots=[tmp_path / "memory"])
    import tomllib

    parsed = tomllib.loads(config)
    assert parsed["sandbox_mode"] == "workspace-write" and parsed["approval_policy"] == "never"
    assert parsed["sandbox_workspace_write"] == {"writable_roots": [str(tmp_path / "memory")], "network_access": False,
                                                 "exclude_slash_tmp": True, "exclude_tmpdir_env_var": True}
    assert parsed["features"]["shell_tool"] is False and parsed["agents"]["enabled"] is False
    assert parsed["mcp_servers"]["robot"]["url"] == "http://127.0.0.1:9/mcp"
    with pytest.raises(ValueError, match="max_wall_time_s"):
        build_planner("codex", api_key="k", max_wall_time_s=-1)
    with pytest.raises(ValueError, match="api_key_env"):
        build_planner("codex", api_key_env="RPENT_TEST_SURELY_UNSET")
    with pytest.raises(ValueError, match="codex_bin"):
        build_planner("codex", api_key="k", codex_bin=tmp_path / "no-such-codex")


def test_model_service_error_ends_the_run_with_status_error(model_server: FakeModelServer,
                                                            toolkit: ToyToolkit) -> None:
    model_server.script(Failure(status=400, message="scripted bad request"))
    result = solve(model_server, toolkit)

    assert result.status is PlannerStatus.ERROR and result.finish_result is None
    assert "scripted bad request" in (result.error or ""), result.error


def test_codex_shell_when_enabled_cannot_write_outside_the_run_directories(model_server: FakeModelServer,
                                                                           toolkit: ToyToolkit,
                                                                           tmp_path: Path) -> None:
    inside, in_memory, outside = toolkit.output_dir / "inside.txt", toolkit.memory.root / "note.txt", tmp_path / "outside.txt"
    toolkit.memory.ensure()
    seen: dict[str, Any] = {}

    def after_shell(body: dict[str, Any]) -> Reply:
        seen["output"] = output_text(outputs(body)[-1])
        return Reply([robot("finish", status="failure", summary="Only wrote files.")])

    command = f"echo a > {inside}; echo b > {in_memory}; echo c > {outside}; echo outside_rc=$?"
    model_server.script(Reply([ToolUse("exec_command", {"cmd": command}, id="call_shell")]), after_shell)
    model_server.when_exhausted = Reply([Text("Done.")])
    result = solve(model_server, toolkit, allow_shell=True)

    assert result.status is PlannerStatus.FINISHED, (result.stop_reason, result.error)
    assert inside.read_text() == "a\n" and in_memory.read_text() == "b\n"
    assert not outside.exists() and "outside_rc=1" in seen["output"]
