"""A script written against beambot's RobotAgent runs unchanged on rpent.mcp.RobotAgent.

beambot's interface: positional `RobotAgent(model, mcp_config_path, system_prompt_prefix, extra_tools,
extra_dispatch, tool_filter)`, `tool_filter(server_name, tool_name)`, `chat(text, on_tool_call, on_text)
-> str` with `on_tool_call(name, arguments, result_text)` after each call and `on_text(final_text)`
once. The endpoint and key come from the environment, as such a script leaves them. The real
anthropic SDK talks to the scripted model server; the toy robot is a real MCP server over HTTP.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from fakes import FakeModelServer, Reply, Text, ToolUse
from mcp_support import write_mcp_json

from robots.toy.runtime import ToyWorld
from robots.toy.toolkit import ToyToolkit
from rpent.mcp import McpHttpServer, RobotAgent, build_mcp_server
from rpent.settings import DEFAULT_MODEL, MODEL_ENV

pytestmark = pytest.mark.timeout(60)

PING = {"name": "ping", "description": "Answer pong.", "input_schema": {"type": "object", "properties": {
    "word": {"type": "string"}}}}


async def dispatch(name: str, arguments: dict[str, Any]) -> str:
    return f"pong {arguments.get('word', '')}".strip()


@pytest.fixture
def beambot_env(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    """What a beambot user has exported: the key and (here) the endpoint; no model variable."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", model_server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.delenv(MODEL_ENV, raising=False)
    return model_server


def test_a_beambot_script_drives_the_toy_through_mcp_unchanged(beambot_env: FakeModelServer, tmp_path: Path) -> None:
    toolkit = ToyToolkit(robot=ToyWorld(), output_dir=tmp_path / "run")
    beambot_env.script(Reply([Text("Looking first."), ToolUse("get_state", {}), ToolUse("ping", {"word": "hi"})]),
                       Reply([Text("The gripper "), Text("is at rest.")]))
    allowed = {"get_state", "finish"}
    seen: list[tuple[str, dict[str, Any], str]] = []
    texts: list[str] = []

    async def script(url: str) -> str:
        config = write_mcp_json(tmp_path, {"toy": {"type": "http", "url": url}})
        agent = RobotAgent("fake-model", str(config), "You operate the toy arm.", [PING], dispatch,
                           lambda server, tool: tool in allowed)
        await agent.connect()
        try:
            assert [t["name"] for t in agent.tools] == ["get_state", "finish", "ping"]
            return await agent.chat("Where is the gripper?",
                                    lambda name, args, result: seen.append((name, args, result)), texts.append)
        finally:
            await agent.disconnect()

    try:
        with McpHttpServer(build_mcp_server(toolkit), port=0) as http:
            reply = asyncio.run(script(http.url))
    finally:
        toolkit.close(timeout=10)

    assert reply == "The gripper is at rest."
    assert texts == ["The gripper is at rest."]  # once, the whole final text
    (state_name, state_args, state_text), ping = seen
    assert (state_name, state_args) == ("get_state", {}) and '"gripper_xyz_m"' in state_text
    assert ping == ("ping", {"word": "hi"}, "pong hi")
    first = beambot_env.model_requests[0]
    assert first.body["model"] == "fake-model" and first.body["system"].startswith("You operate the toy arm.")


def test_the_richer_result_of_the_last_chat_stays_available(beambot_env: FakeModelServer, tmp_path: Path) -> None:
    beambot_env.script(Reply([ToolUse("ping", {"word": "a"})]), Reply([Text("done")]))
    config = write_mcp_json(tmp_path, {})

    async def script() -> tuple[str, Any]:
        async with RobotAgent("fake-model", config, "", [PING], dispatch) as agent:
            text = await agent.chat("Ping.")
            return text, agent.last_result

    text, result = asyncio.run(script())
    assert text == "done" and result.text == "done" and result.stop_reason == "end_turn"
    assert [(c.name, c.text) for c in result.tool_calls] == [("ping", "pong a")]


def test_callbacks_may_be_coroutines(beambot_env: FakeModelServer, tmp_path: Path) -> None:
    beambot_env.script(Reply([ToolUse("ping", {})]), Reply([Text("ok")]))
    seen: list[Any] = []

    async def on_tool_call(name: str, arguments: dict[str, Any], result_text: str) -> None:
        seen.append((name, result_text))

    async def on_text(text: str) -> None:
        seen.append(text)

    async def script() -> str:
        async with RobotAgent("fake-model", write_mcp_json(tmp_path, {}), "", [PING], dispatch) as agent:
            return await agent.chat("Ping.", on_tool_call=on_tool_call, on_text=on_text)

    assert asyncio.run(script()) == "ok"
    assert seen == [("ping", "pong"), "ok"]


@pytest.mark.parametrize("model", [None, ""])
def test_a_falsy_model_falls_back_to_the_variable_then_the_default(
    beambot_env: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str | None
) -> None:
    config = write_mcp_json(tmp_path, {})

    async def one_chat() -> str:
        async with RobotAgent(model, config) as agent:
            return await agent.chat("hi")

    beambot_env.script(Reply([Text("one")]), Reply([Text("two")]))
    asyncio.run(one_chat())
    monkeypatch.setenv(MODEL_ENV, "lab-model")
    asyncio.run(one_chat())
    assert [r.body["model"] for r in beambot_env.model_requests] == [DEFAULT_MODEL, "lab-model"]


def test_connect_without_any_mcp_json_or_local_tools_is_file_not_found(
    beambot_env: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nowhere = tmp_path / "a" / "b"
    nowhere.mkdir(parents=True)
    monkeypatch.chdir(nowhere)
    if any((folder / ".mcp.json").is_file() for folder in [nowhere, *nowhere.parents]):
        pytest.skip("a .mcp.json exists above the temporary directory")

    agent = RobotAgent()
    with pytest.raises(FileNotFoundError, match=r"\.mcp\.json"):
        asyncio.run(agent.connect())
    with pytest.raises(FileNotFoundError, match=r"no-such\.json"):
        asyncio.run(RobotAgent(None, tmp_path / "no-such.json").connect())

    async def local_only() -> list[str]:
        async with RobotAgent(None, None, "", [PING], dispatch) as agent:
            return [t["name"] for t in agent.tools]

    assert asyncio.run(local_only()) == ["ping"]  # local tools alone need no config file


def test_project_options_are_keyword_only_after_beambots_six() -> None:
    with pytest.raises(TypeError):
        RobotAgent("m", None, "", None, None, None, "http://127.0.0.1:1")  # type: ignore[misc]


# -- a beambot deployment's environment ----------------------------------------------------------
# beambot's client reads its gateway from HERMES_ENDPOINT (the Messages API under <endpoint>/anthropic),
# its key from AIFAPIM_API_KEY and its model from BEAMBOT_MODEL; RobotAgent reads them after its own.

RPENT_VARIABLES = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", MODEL_ENV)


@pytest.fixture
def beambot_deployment(model_server: FakeModelServer, monkeypatch: pytest.MonkeyPatch) -> FakeModelServer:
    """A beambot deployment's environment: its gateway, key and model, and none of RPent's own variables."""
    for name in RPENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HERMES_ENDPOINT", model_server.base_url)
    monkeypatch.setenv("AIFAPIM_API_KEY", "gateway-key")
    monkeypatch.setenv("BEAMBOT_MODEL", "beambot-model")
    return model_server


def _sent_key(request: Any) -> str:
    # The SDK sends an api_key as x-api-key or as a bearer token, depending on its version.
    return request.headers.get("x-api-key") or request.headers["authorization"].removeprefix("Bearer ")


def _one_chat(*args: Any, **kwargs: Any) -> str:
    async def chat() -> str:
        async with RobotAgent(*args, **kwargs) as agent:
            return await agent.chat("hi")

    return asyncio.run(chat())


def test_a_beambot_deployments_environment_reaches_its_gateway_unchanged(
    beambot_deployment: FakeModelServer, tmp_path: Path
) -> None:
    beambot_deployment.script(Reply([Text("hello")]))
    assert _one_chat(None, write_mcp_json(tmp_path, {})) == "hello"
    (request,) = beambot_deployment.model_requests
    assert request.path == "/anthropic/v1/messages"
    assert _sent_key(request) == "gateway-key"
    assert request.body["model"] == "beambot-model"


def test_rpents_own_variables_and_then_the_arguments_come_before_beambots(
    beambot_deployment: FakeModelServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_mcp_json(tmp_path, {})
    beambot_deployment.script(Reply([Text("one")]), Reply([Text("two")]))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", beambot_deployment.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "anthropic-key")
    monkeypatch.setenv(MODEL_ENV, "rpent-model")
    _one_chat(None, config)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # nothing listens there: the argument wins
    _one_chat("argument-model", config, base_url=beambot_deployment.base_url, api_key="argument-key")
    assert [(r.path, _sent_key(r), r.body["model"]) for r in beambot_deployment.model_requests] == [
        ("/v1/messages", "anthropic-key", "rpent-model"),
        ("/v1/messages", "argument-key", "argument-model"),
    ]


def test_a_beambot_key_without_an_endpoint_goes_to_beambots_own_default_gateway(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # beambot sends AIFAPIM_API_KEY to its default gateway when HERMES_ENDPOINT is unset: so does
    # RobotAgent, rather than hand a gateway's key to the public Anthropic API.
    for name in (*RPENT_VARIABLES, "HERMES_ENDPOINT", "BEAMBOT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AIFAPIM_API_KEY", "gateway-key")
    assert RobotAgent().base_url == "https://hermes.nsls2.bnl.gov/anthropic"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "anthropic-key")  # RPent's own key: the public API, as before
    assert RobotAgent().base_url is None


def test_a_named_key_variable_is_not_replaced_by_beambots_key(monkeypatch: pytest.MonkeyPatch) -> None:
    # api_key_env names the one variable to read: a typo there must not send beambot's key instead.
    monkeypatch.delenv("LAB_KEY", raising=False)
    monkeypatch.setenv("AIFAPIM_API_KEY", "gateway-key")
    with pytest.raises(ValueError, match="api_key_env: environment variable LAB_KEY is not set"):
        RobotAgent(api_key_env="LAB_KEY")
