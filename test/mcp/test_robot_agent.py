"""RobotAgent with the real anthropic SDK against the scripted model server, and real MCP servers:
the toy robot served by the bridge over stdio (a subprocess) or streamable HTTP (in-process)."""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeModelServer, Reply, Text, ToolUse
from mcp_support import (
    FAR_TARGET,
    PNG_SIGNATURE,
    TOY_SOLUTION,
    TOY_SOLUTION_NAMES,
    EventLog,
    read_steps,
    toy_mcp_entry,
    write_mcp_json,
)

from robots.toy.runtime import ToyWorld
from robots.toy.toolkit import ToyToolkit
from rpent.mcp import McpHttpServer, RobotAgent, ToolNameConflict, build_mcp_server
from rpent.mcp.agent import CANCELLED_TEXT

pytestmark = pytest.mark.timeout(90)

TOY_TOOL_NAMES = ["move_to", "grasp", "release", "get_state", "capture_image", "observe", "finish",
                  "read_text_file", "write_text_file", "list_dir", "stop"]
PING = {"name": "ping", "description": "Answer pong.", "input_schema": {"type": "object", "properties": {
    "word": {"type": "string"}}}}
BOOM = {"name": "boom", "description": "Always fails.", "input_schema": {"type": "object", "properties": {}}}


def agent_for(server: FakeModelServer, config: Path, **options: Any) -> RobotAgent:
    options.setdefault("api_key", "test-key")
    return RobotAgent(model="fake-model", mcp_config_path=config, base_url=server.base_url, **options)


def child_pids() -> set[int]:
    """Live (not zombie) child processes of this test process."""
    children = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                children.add(int(entry.name))
    return children


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for b in body["messages"][-1]["content"] if b["type"] == "tool_result"]


async def local_dispatch(name: str, arguments: dict[str, Any]) -> Any:
    if name == "ping":
        return f"pong {arguments.get('word', '')}".strip()
    raise RuntimeError("the local tool broke")


@pytest.fixture
def empty_config(tmp_path: Path) -> Path:
    return write_mcp_json(tmp_path, {})


# -- with the toy robot served over stdio ----------------------------------------------------------


@pytest.mark.slow
def test_agent_drives_the_toy_robot_to_a_finish_and_sees_its_images(model_server: FakeModelServer,
                                                                    tmp_path: Path) -> None:
    out = tmp_path / "served"
    config = write_mcp_json(tmp_path, {"toy": toy_mcp_entry(out)})
    model_server.script(*[Reply([ToolUse(name, args)]) for name, args in TOY_SOLUTION],
                        Reply([Text("The red block is in the bin.")]))
    calls: list[tuple[str, dict[str, Any]]] = []
    streamed: list[str] = []
    before = child_pids()

    async def main() -> Any:
        agent = agent_for(model_server, config, system_prompt_prefix="You operate the toy arm.")
        statuses = await agent.connect()
        assert statuses["toy"].connected and statuses["toy"].tools == TOY_TOOL_NAMES
        assert len(child_pids() - before) == 1  # the server subprocess
        try:
            return await agent.chat_result("Put the red block in the bin.",
                                           on_tool_call=lambda name, args, text: calls.append((name, args)),
                                           on_text=streamed.append)
        finally:
            await agent.disconnect()

    result = asyncio.run(main())
    assert result.stop_reason == "end_turn" and result.text == "The red block is in the bin."
    assert streamed == [result.text]
    assert calls == TOY_SOLUTION
    assert [r.name for r in result.tool_calls] == TOY_SOLUTION_NAMES
    assert [r.server for r in result.tool_calls] == ["toy"] * len(TOY_SOLUTION)
    assert not any(r.is_error for r in result.tool_calls)
    assert [s["tool"] for s in read_steps(out)] == TOY_SOLUTION_NAMES  # the robot did exactly this

    requests = [r.body for r in model_server.model_requests]
    assert len(requests) == len(TOY_SOLUTION) + 1 == result.iterations
    assert [t["name"] for t in requests[0]["tools"]] == TOY_TOOL_NAMES
    assert requests[0]["system"].startswith("You operate the toy arm.")
    after_move = tool_results(requests[2])[0]
    image = after_move["content"][1]
    assert image["type"] == "image" and image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]).startswith(PNG_SIGNATURE)
    after_capture = tool_results(requests[TOY_SOLUTION_NAMES.index("capture_image") + 1])[0]
    assert "images/00008_capture_image_top.png" in after_capture["content"][0]["text"]

    # disconnect() closed the session: the server shut down cleanly (its record is complete).
    assert (out / "episode.mp4").is_file()
    assert child_pids() - before == set()


@pytest.mark.slow
def test_tool_errors_reach_the_model_flagged_is_error(model_server: FakeModelServer, tmp_path: Path) -> None:
    config = write_mcp_json(tmp_path, {"toy": toy_mcp_entry(tmp_path / "served")})
    model_server.script(
        Reply([ToolUse("grasp", {}), ToolUse("move_to", {"x_m": 5, "y_m": 0.1}), ToolUse("fly", {})]),
        Reply([Text("The grasp failed.")]),
    )

    async def main() -> Any:
        async with agent_for(model_server, config) as agent:
            return await agent.chat_result("Grasp something.")

    result = asyncio.run(main())
    assert [(r.name, r.is_error) for r in result.tool_calls] == [("grasp", True), ("move_to", True), ("fly", True)]
    grasp, move, fly = tool_results(model_server.model_requests[1].body)
    assert grasp["is_error"] is True and "grasp closed on nothing" in grasp["content"][0]["text"]
    assert move["is_error"] is True and "x_m: Input should be less than or equal to 0.6" in move["content"][0]["text"]
    assert fly["is_error"] is True and "unknown tool 'fly'" in fly["content"][0]["text"]
    assert [s["tool"] for s in read_steps(tmp_path / "served")] == ["grasp", "move_to"]


@pytest.mark.slow
def test_a_failing_server_is_reported_and_the_others_are_used(model_server: FakeModelServer, tmp_path: Path) -> None:
    config = write_mcp_json(tmp_path, {
        "missing": {"command": str(tmp_path / "no-such-server")},
        "crashing": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
        "toy": toy_mcp_entry(tmp_path / "served"),
    })
    model_server.script(Reply([ToolUse("get_state", {})]), Reply([Text("It is at rest.")]))

    async def main() -> Any:
        async with agent_for(model_server, config, connect_timeout_s=30) as agent:
            statuses = agent.servers
            assert not statuses["missing"].connected and "no-such-server" in statuses["missing"].error
            assert not statuses["crashing"].connected and statuses["crashing"].error
            assert statuses["toy"].connected and [t["name"] for t in agent.tools] == TOY_TOOL_NAMES
            return await agent.chat_result("Where is the gripper?")

    result = asyncio.run(main())
    assert [(r.name, r.is_error) for r in result.tool_calls] == [("get_state", False)]


@pytest.mark.slow
def test_a_server_that_never_answers_times_out_and_its_process_is_stopped(model_server: FakeModelServer,
                                                                        tmp_path: Path) -> None:
    config = write_mcp_json(tmp_path, {"silent": {"command": sys.executable,
                                                  "args": ["-c", "import time; time.sleep(60)"]}})

    async def main() -> Any:
        async with agent_for(model_server, config, connect_timeout_s=2) as agent:
            return agent.servers["silent"]

    status = asyncio.run(main())
    assert not status.connected and status.error == "TimeoutError: did not answer within 2 s"
    # (the autouse fixture checks that the silent process is gone)


@pytest.mark.slow
def test_duplicate_tool_names_are_rejected_unless_filtered(model_server: FakeModelServer, tmp_path: Path) -> None:
    config = write_mcp_json(tmp_path, {"toy_a": toy_mcp_entry(tmp_path / "a"), "toy_b": toy_mcp_entry(tmp_path / "b")})
    before = child_pids()

    async def conflicting() -> None:
        with pytest.raises(ToolNameConflict, match="'move_to' is offered by MCP server 'toy_a' and by MCP server 'toy_b'"):
            await agent_for(model_server, config).connect()
        assert child_pids() - before == set()  # both servers were shut down again

    async def filtered() -> list[str]:
        (tmp_path / "again").mkdir()  # started again, each server needs a new record directory
        again = write_mcp_json(tmp_path / "again", {"toy_a": toy_mcp_entry(tmp_path / "a2"),
                                                    "toy_b": toy_mcp_entry(tmp_path / "b2")})
        agent = agent_for(model_server, again, tool_filter=lambda server, tool: server == "toy_a",
                          extra_tools=[PING], extra_dispatch=local_dispatch)
        async with agent:
            assert agent.servers["toy_b"].connected and agent.servers["toy_b"].tools == []
            return [t["name"] for t in agent.tools]

    async def local_clash() -> None:
        (tmp_path / "one").mkdir()
        one = write_mcp_json(tmp_path / "one", {"toy": toy_mcp_entry(tmp_path / "c")})
        shadow = dict(PING, name="get_state")
        with pytest.raises(ToolNameConflict, match="'get_state' is offered by MCP server 'toy' and by extra_tools"):
            await agent_for(model_server, one, extra_tools=[shadow], extra_dispatch=local_dispatch).connect()

    asyncio.run(conflicting())
    assert asyncio.run(filtered()) == [*TOY_TOOL_NAMES, "ping"]
    asyncio.run(local_clash())
    assert child_pids() - before == set()


# -- with the toy robot served over HTTP in this process (the test watches the toolkit) ------------


@pytest.mark.slow
def test_cancelling_chat_stops_exactly_the_running_call_and_keeps_the_history_valid(
    model_server: FakeModelServer, tmp_path: Path
) -> None:
    events = EventLog()
    world = ToyWorld(speed_m_s=0.02)
    toolkit = ToyToolkit(robot=world, output_dir=tmp_path / "run", dashboard_events=events)

    def after_cancel(body: dict[str, Any]) -> Reply:
        user, assistant, latest = body["messages"]
        (tool_use,) = assistant["content"]
        result, question = latest["content"]
        assert result == {"type": "tool_result", "tool_use_id": tool_use["id"], "is_error": True,
                          "content": [{"type": "text", "text": CANCELLED_TEXT}]}
        assert question == {"type": "text", "text": "Where are you now?"}
        return Reply([Text("Stopped half-way.")])

    model_server.script(Reply([ToolUse("move_to", FAR_TARGET)]), after_cancel)

    async def main(url: str) -> Any:
        config = write_mcp_json(tmp_path, {"toy": {"type": "http", "url": url}})
        async with agent_for(model_server, config) as agent:
            chat = asyncio.ensure_future(agent.chat_result("Go to the far corner."))
            # These waits run on the agent's own event loop: they finish only if chat() never blocks it.
            await asyncio.to_thread(events.wait_for, "tool_started", "move_to")
            chat.cancel()
            with pytest.raises(asyncio.CancelledError):
                await chat
            finished = await asyncio.to_thread(events.wait_for, "tool_finished", "move_to")
            assert finished["error"].startswith("cancelled")
            return await agent.chat_result("Where are you now?")

    try:
        with McpHttpServer(build_mcp_server(toolkit), port=0) as http:
            reply = asyncio.run(main(http.url))
    finally:
        toolkit.close(timeout=10)
    assert reply.text == "Stopped half-way." and reply.tool_calls == []
    assert world.stops == 1
    assert [(s["tool"], s["cancelled"]) for s in read_steps(tmp_path / "run")] == [("move_to", True)]


@pytest.mark.slow
def test_a_call_over_tool_timeout_is_cancelled_on_the_robot_and_reported(model_server: FakeModelServer,
                                                                        tmp_path: Path) -> None:
    events = EventLog()
    world = ToyWorld(speed_m_s=0.02)
    toolkit = ToyToolkit(robot=world, output_dir=tmp_path / "run", dashboard_events=events)
    model_server.script(Reply([ToolUse("move_to", FAR_TARGET)]), Reply([Text("Too slow.")]))

    async def main(url: str) -> Any:
        config = write_mcp_json(tmp_path, {"toy": {"type": "http", "url": url}})
        async with agent_for(model_server, config, tool_timeout_s=1.0) as agent:
            result = await agent.chat_result("Go to the far corner.")
            await asyncio.to_thread(events.wait_for, "tool_finished", "move_to")
            return result

    try:
        with McpHttpServer(build_mcp_server(toolkit), port=0) as http:
            result = asyncio.run(main(http.url))
    finally:
        toolkit.close(timeout=10)
    (call,) = result.tool_calls
    assert call.is_error and call.text.startswith("MCP server 'toy' failed:")
    (sent,) = tool_results(model_server.model_requests[1].body)
    assert sent["is_error"] is True
    assert world.stops == 1  # the timed-out motion was cancelled on the robot, not left running
    assert read_steps(tmp_path / "run")[0]["cancelled"] is True


@pytest.mark.slow
def test_http_server_entries_send_their_headers_with_variables_filled(model_server: FakeModelServer, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_TOKEN", "t0ken")
    toolkit = ToyToolkit(robot=ToyWorld(), output_dir=tmp_path / "run")
    server = build_mcp_server(toolkit)
    seen: list[str | None] = []

    async def record_headers(ctx: Any, call_next: Any) -> Any:
        if ctx.request is not None:
            seen.append(ctx.request.headers.get("x-lab-token"))
        return await call_next(ctx)

    server.middleware.append(record_headers)

    async def main(url: str) -> Any:
        config = write_mcp_json(tmp_path, {"toy": {"type": "http", "url": url, "headers": {"X-Lab-Token": "${LAB_TOKEN}"}}})
        async with agent_for(model_server, config) as agent:
            return await agent.call_tool("get_state", {})

    try:
        with McpHttpServer(server, port=0) as http:
            record = asyncio.run(main(http.url))
    finally:
        toolkit.close(timeout=10)
    assert not record.is_error and record.server == "toy"
    assert seen and set(seen) == {"t0ken"}


# -- local tools only (no server processes) ---------------------------------------------------------


def test_local_tools_are_dispatched_and_their_failures_are_error_results(model_server: FakeModelServer,
                                                                         empty_config: Path) -> None:
    model_server.script(Reply([ToolUse("ping", {"word": "hi"}), ToolUse("boom", {})]), Reply([Text("done")]))

    async def main() -> Any:
        async with agent_for(model_server, empty_config, extra_tools=[PING, BOOM],
                             extra_dispatch=local_dispatch) as agent:
            return await agent.chat_result("Ping, then boom.")

    result = asyncio.run(main())
    assert [(r.name, r.server, r.is_error, r.text) for r in result.tool_calls] == [
        ("ping", "local", False, "pong hi"),
        ("boom", "local", True, "local tool failed: RuntimeError: the local tool broke"),
    ]
    assert [t["name"] for t in model_server.model_requests[0].body["tools"]] == ["ping", "boom"]


def test_iteration_cap_ends_the_chat_with_every_call_answered(model_server: FakeModelServer,
                                                             empty_config: Path) -> None:
    model_server.script(*[Reply([ToolUse("ping", {})]) for _ in range(3)])

    def next_chat(body: dict[str, Any]) -> Reply:
        uses = [b["id"] for m in body["messages"] if m["role"] == "assistant" for b in m["content"]]
        answered = [b["tool_use_id"] for m in body["messages"] if m["role"] == "user"
                    for b in m["content"] if b["type"] == "tool_result"]
        assert uses == answered and len(uses) == 3
        return Reply([Text("ok")])

    async def main() -> tuple[Any, Any]:
        async with agent_for(model_server, empty_config, max_iterations=3, extra_tools=[PING],
                             extra_dispatch=local_dispatch) as agent:
            capped = await agent.chat_result("Ping forever.")
            model_server.script(next_chat)
            return capped, await agent.chat_result("Stop now.")

    capped, after = asyncio.run(main())
    assert capped.stop_reason == "max_iterations" and capped.iterations == 3 and len(capped.tool_calls) == 3
    assert after.text == "ok"
    assert len(model_server.model_requests) == 4


def test_clear_history_starts_a_fresh_conversation(model_server: FakeModelServer, empty_config: Path) -> None:
    model_server.script(Reply([Text("one")]), Reply([Text("two")]), Reply([Text("three")]))

    async def main() -> None:
        async with agent_for(model_server, empty_config) as agent:
            await agent.chat("first")
            await agent.chat("second")
            agent.clear_history()
            await agent.chat("third")

    asyncio.run(main())
    counts = [len(r.body["messages"]) for r in model_server.model_requests]
    assert counts == [1, 3, 1]
    assert "tools" not in model_server.model_requests[0].body  # nothing configured, nothing offered


def test_gateway_endpoint_and_bearer_key_from_a_named_variable(model_server: FakeModelServer, empty_config: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_GATEWAY_KEY", "gw-secret")
    model_server.script(Reply([Text("hello")]))

    async def main() -> Any:
        agent = RobotAgent(model="lab-model", mcp_config_path=empty_config, base_url=model_server.base_url,
                           api_key_env="LAB_GATEWAY_KEY", bearer_auth=True)
        async with agent:
            return await agent.chat("hi")

    assert asyncio.run(main()) == "hello"
    (request,) = model_server.model_requests
    assert request.headers["authorization"] == "Bearer gw-secret" and request.body["model"] == "lab-model"


def test_bad_options_are_refused_naming_the_option(monkeypatch: pytest.MonkeyPatch, empty_config: Path) -> None:
    monkeypatch.delenv("RPENT_NO_SUCH_KEY", raising=False)
    with pytest.raises(ValueError, match="api_key_env: environment variable RPENT_NO_SUCH_KEY is not set"):
        RobotAgent(api_key_env="RPENT_NO_SUCH_KEY")
    with pytest.raises(ValueError, match="max_iterations: must be an integer >= 1"):
        RobotAgent(api_key="k", max_iterations=0)
    with pytest.raises(ValueError, match="extra_dispatch: required when extra_tools are given"):
        RobotAgent(api_key="k", extra_tools=[PING])
    with pytest.raises(ValueError, match=r"extra_tools\[0\]\.name"):
        RobotAgent(api_key="k", extra_tools=[dict(PING, name="bad name")], extra_dispatch=local_dispatch)


@pytest.mark.parametrize("option", ["max_output_tokens", "max_iterations", "max_retries", "connect_timeout_s",
                                    "request_timeout_s", "retry_base_delay_s", "tool_timeout_s"])
def test_a_bool_is_refused_as_a_count_or_a_time_naming_the_option(option: str) -> None:
    # True is an int to Python; as a token count or a number of seconds it is a slip, not 1.
    with pytest.raises(ValueError, match=rf"^{option}: must be .*, got True$"):
        RobotAgent(api_key="k", **{option: True})


def test_chat_before_connect_is_refused(empty_config: Path) -> None:
    agent = RobotAgent(api_key="k", mcp_config_path=empty_config)
    with pytest.raises(RuntimeError, match="chat: not connected"):
        asyncio.run(agent.chat("hi"))


@pytest.fixture(autouse=True)
def _no_stray_children() -> Iterator[None]:
    before = child_pids()
    yield
    assert child_pids() - before == set(), "a test left an MCP server process running"
