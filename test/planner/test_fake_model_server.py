"""The scripted model server must satisfy the official anthropic SDK, or planner tests prove nothing."""

from __future__ import annotations

import asyncio
import json

import anthropic
import httpx
import pytest
from fakes import Cut, Failure, FakeModelServer, Reply, ScriptError, Text, ToolUse

pytestmark = pytest.mark.timeout(30)

TOOLS = [{"name": "move", "description": "Move.", "input_schema": {"type": "object", "properties": {"dx": {"type": "number"}}}}]


def _client(server: FakeModelServer, **kwargs: object) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url, api_key="test-key", **kwargs)


def _async_client(server: FakeModelServer, **kwargs: object) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=server.base_url, api_key="test-key", **kwargs)


def _ask(**extra: object) -> dict:
    return dict(model="fake-model", max_tokens=100, tools=TOOLS,
                messages=[{"role": "user", "content": "go"}], **extra)


def test_sync_json_reply_carries_text_tool_use_and_stop_reason(model_server: FakeModelServer) -> None:
    model_server.script(Reply([Text("moving"), ToolUse("move", {"dx": 0.1}, id="toolu_1")]))
    message = _client(model_server).messages.create(**_ask())
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[1].input == {"dx": 0.1} and message.content[1].id == "toolu_1"
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens > 0


def test_sync_stream_reassembles_text_and_partial_tool_json(model_server: FakeModelServer) -> None:
    long_text = "a fairly long sentence that spans several text deltas"
    args = {"dx": 0.05, "label": "x" * 40}
    model_server.script(Reply([Text(long_text), ToolUse("move", args)]))
    with _client(model_server).messages.stream(**_ask()) as stream:
        texts = list(stream.text_stream)
        message = stream.get_final_message()
    assert "".join(texts) == long_text and len(texts) > 1
    assert message.content[1].input == args
    assert message.stop_reason == "tool_use"
    assert model_server.model_requests[0].body["stream"] is True


def test_async_json_and_stream_on_one_keep_alive_connection(model_server: FakeModelServer) -> None:
    model_server.script(Reply([Text("one")]), Reply([Text("two")]))

    async def run() -> tuple[str, str]:
        async with _async_client(model_server) as client:
            first = await client.messages.create(**_ask())
            async with client.messages.stream(**_ask()) as stream:
                second = await stream.get_final_message()
        return first.content[0].text, second.content[0].text

    assert asyncio.run(run()) == ("one", "two")


def test_turn_function_sees_the_request_body(model_server: FakeModelServer) -> None:
    seen: list[dict] = []

    def turn(body: dict) -> Reply:
        seen.append(body)
        return Reply([Text("ok")])

    model_server.script(turn)
    _client(model_server).messages.create(**_ask(system="be careful"))
    assert seen[0]["system"] == "be careful" and seen[0]["tools"] == TOOLS
    headers = model_server.model_requests[0].headers
    assert headers.get("x-api-key") == "test-key" or headers.get("authorization") == "Bearer test-key"


@pytest.mark.parametrize("status", [429, 500, 529])
def test_sdk_retries_scripted_failures_honouring_retry_after(model_server: FakeModelServer, status: int) -> None:
    model_server.script(Failure(status, retry_after_s=0.01), Reply([Text("after retry")]))
    message = _client(model_server, max_retries=2).messages.create(**_ask())
    assert message.content[0].text == "after retry"
    assert len(model_server.model_requests) == 2


def test_overloaded_error_reaches_the_client_with_its_type(model_server: FakeModelServer) -> None:
    model_server.script(Failure(529, message="Overloaded"))
    with pytest.raises(anthropic.APIStatusError) as raised:
        _client(model_server, max_retries=0).messages.create(**_ask())
    assert raised.value.status_code == 529
    assert raised.value.body["error"]["type"] == "overloaded_error"


def test_mid_stream_error_event_raises_in_the_client(model_server: FakeModelServer) -> None:
    model_server.script(Failure(529, mid_stream=True))
    with pytest.raises(anthropic.APIStatusError), _client(model_server).messages.stream(**_ask()) as stream:
        stream.get_final_message()


def test_request_beyond_the_script_is_reported() -> None:
    with FakeModelServer() as server, pytest.raises(anthropic.BadRequestError):
        _client(server, max_retries=0).messages.create(**_ask())
    with pytest.raises(ScriptError):
        server.raise_errors()


def test_head_root_and_beta_query_are_answered(model_server: FakeModelServer) -> None:
    model_server.script(Reply([Text("beta")]))
    with httpx.Client(base_url=model_server.base_url) as http:
        assert http.head("/").status_code == 200
        reply = http.post("/v1/messages?beta=true", json=_ask())
    assert reply.json()["content"][0]["text"] == "beta"
    assert model_server.model_requests[0].query == "beta=true"


def _sse_events(text: str) -> list[tuple[str, dict]]:
    events = []
    for chunk in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_responses_api_streams_function_call_with_namespace_and_usage(model_server: FakeModelServer) -> None:
    model_server.script(Reply([Text("calling"), ToolUse("move", {"dx": 1}, id="call_1", namespace="mcp__robot")]))
    with httpx.Client(base_url=model_server.base_url) as http:
        reply = http.post("/v1/responses", json={"model": "gpt-fake", "input": [], "stream": True})
    events = _sse_events(reply.text)
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.output_text.delta" in kinds
    done = [data["item"] for kind, data in events if kind == "response.output_item.done"]
    assert done[1] == {"type": "function_call", "id": done[1]["id"], "call_id": "call_1", "name": "move",
                       "namespace": "mcp__robot", "arguments": '{"dx": 1}', "status": "completed"}
    assert events[-1][1]["response"]["usage"]["total_tokens"] > 0


def _stream_events(server: FakeModelServer, received: list[tuple[str, dict]]) -> None:
    """POST a streaming request with a raw HTTP client, collecting the SSE events as they arrive."""
    with httpx.Client(base_url=server.base_url) as http, http.stream("POST", "/v1/messages", json=_ask(stream=True)) as reply:
        for chunk in reply.iter_text():
            received.extend(_sse_events(chunk))


def test_cut_drops_the_connection_mid_arguments_without_message_stop(model_server: FakeModelServer) -> None:
    model_server.script(Reply([ToolUse("move", {"dx": 0.125, "label": "left"})], cut=Cut("input_json_delta", nth=2)))
    received: list[tuple[str, dict]] = []
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        _stream_events(model_server, received)
    kinds = [kind for kind, _ in received]
    assert kinds == ["message_start", "ping", "content_block_start", "content_block_delta", "content_block_delta"]
    assert received[-1][1]["delta"] == {"type": "input_json_delta", "partial_json": '{"dx": 0.125'}


def test_cut_can_end_the_body_cleanly_with_the_rest_missing(model_server: FakeModelServer) -> None:
    model_server.script(Reply([Text("moving")], cut=Cut("message_delta", drop_connection=False)))
    received: list[tuple[str, dict]] = []
    _stream_events(model_server, received)
    assert [kind for kind, _ in received][-2:] == ["content_block_stop", "message_delta"]


def test_sdk_sees_a_cut_stream_as_a_transport_error_or_an_unfinished_message(model_server: FakeModelServer) -> None:
    model_server.script(Reply([Text("a sentence long enough for two deltas")], cut=Cut("text_delta", nth=2)),
                        Reply([Text("a sentence long enough for two deltas")], cut=Cut("text_delta", drop_connection=False)))
    with pytest.raises(Exception, match="incomplete chunked read"), _client(model_server).messages.stream(**_ask()) as stream:
        stream.get_final_message()
    with _client(model_server).messages.stream(**_ask()) as stream:
        message = stream.get_final_message()
    assert message.stop_reason is None and message.content[0].text == "a sentence long "


def test_a_cut_that_is_never_reached_is_reported() -> None:
    with FakeModelServer([Reply([Text("no tool here")], cut=Cut("input_json_delta"))]) as server:
        with _client(server).messages.stream(**_ask()) as stream:
            assert stream.get_final_message().stop_reason == "end_turn"
        with pytest.raises(ScriptError, match="cut never reached"):
            server.raise_errors()
