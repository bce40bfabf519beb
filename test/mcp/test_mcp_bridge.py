"""The Toolkit -> MCP bridge, driven by the real `mcp` client: in-process, over HTTP and over stdio."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp
import pytest
from mcp_support import (
    FAR_TARGET,
    PNG_SIGNATURE,
    TOY_SOLUTION,
    TOY_SOLUTION_NAMES,
    EventLog,
    far_move_running,
    read_steps,
    toy_stdio_params,
    wait_until,
)

from robots.toy.runtime import ToyWorld
from robots.toy.toolkit import ToyToolkit
from rpent.mcp import McpHttpServer, build_mcp_server

pytestmark = pytest.mark.timeout(60)

SLOW = 0.02  # m/s: a far move takes many seconds, plenty of time to cancel it mid-way


@pytest.fixture
def events() -> EventLog:
    return EventLog()


@pytest.fixture
def world() -> ToyWorld:
    return ToyWorld()


@pytest.fixture
def toolkit(tmp_path: Path, world: ToyWorld, events: EventLog) -> Iterator[ToyToolkit]:
    kit = ToyToolkit(robot=world, output_dir=tmp_path / "run", dashboard_events=events)
    yield kit
    kit.close(timeout=10)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def solve(client: mcp.Client) -> list[mcp.types.CallToolResult]:
    return [await client.call_tool(name, args) for name, args in TOY_SOLUTION]


def text_of(result: mcp.types.CallToolResult) -> str:
    return result.content[0].text


# -- in-process (the SDK's direct client) -------------------------------------------------------


def test_lists_every_tool_with_its_schema_and_read_only_hint(toolkit: ToyToolkit) -> None:
    async def main() -> list[mcp.types.Tool]:
        async with mcp.Client(build_mcp_server(toolkit)) as client:
            return (await client.list_tools()).tools

    tools = run(main())
    expected = toolkit.list_tools(include_read_image=False)
    assert [t.name for t in tools] == [t.name for t in expected]
    assert "read_image" not in [t.name for t in tools]  # Claude Code and Codex open PNG paths themselves
    for offered, tool in zip(tools, expected, strict=True):
        assert offered.input_schema == tool.input_schema
        assert offered.description == tool.description
        assert offered.annotations.read_only_hint is tool.readonly
    move = next(t for t in tools if t.name == "move_to")
    assert move.input_schema["properties"]["x_m"]["maximum"] == 0.6


def test_read_image_is_offered_when_asked_for(toolkit: ToyToolkit) -> None:
    async def main() -> list[str]:
        async with mcp.Client(build_mcp_server(toolkit, include_read_image=True)) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert "read_image" in run(main())


def test_result_has_json_text_naming_saved_pngs_and_the_same_pngs_inline(toolkit: ToyToolkit) -> None:
    async def main() -> mcp.types.CallToolResult:
        async with mcp.Client(build_mcp_server(toolkit)) as client:
            return await client.call_tool("capture_image", {})

    result = run(main())
    assert result.is_error is False
    text, image = result.content
    body, _, paths_line = text.text.partition("\n\n")
    assert json.loads(body) == {"camera": "top"}
    (path,) = paths_line.split("(open them to view): ", 1)[1].split(", ")
    assert Path(path).is_absolute()
    assert image.type == "image" and image.mime_type == "image/png"
    png = base64.b64decode(image.data)
    assert png.startswith(PNG_SIGNATURE) and Path(path).read_bytes() == png


def test_without_images_the_text_still_names_the_png_files(toolkit: ToyToolkit) -> None:
    async def main() -> mcp.types.CallToolResult:
        async with mcp.Client(build_mcp_server(toolkit, images=False)) as client:
            return await client.call_tool("capture_image", {})

    result = run(main())
    assert [c.type for c in result.content] == ["text"]
    assert "images/00001_capture_image_top.png" in text_of(result)


def test_bad_arguments_are_an_error_result_naming_the_field_and_nothing_moves(toolkit: ToyToolkit,
                                                                             world: ToyWorld) -> None:
    start = world.state()

    async def main() -> mcp.types.CallToolResult:
        async with mcp.Client(build_mcp_server(toolkit)) as client:
            return await client.call_tool("move_to", {"x_m": 5, "y_m": 0.1})

    result = run(main())
    assert result.is_error is True
    assert "x_m" in text_of(result) and "less than or equal to 0.6" in text_of(result)
    assert world.state() == start


def test_a_failed_robot_action_sets_is_error_and_still_shows_the_scene(toolkit: ToyToolkit) -> None:
    async def main() -> mcp.types.CallToolResult:
        async with mcp.Client(build_mcp_server(toolkit)) as client:
            return await client.call_tool("grasp", {})

    result = run(main())
    assert result.is_error is True
    assert json.loads(text_of(result).split("\n\n")[0])["error"].startswith("grasp closed on nothing")
    assert [c.type for c in result.content] == ["text", "image"]  # the observation after the failed action


def test_unknown_and_unoffered_tools_are_error_results(toolkit: ToyToolkit) -> None:
    async def main() -> list[mcp.types.CallToolResult]:
        async with mcp.Client(build_mcp_server(toolkit)) as client:
            return [await client.call_tool("fly", {}), await client.call_tool("read_image", {"path": "x.png"})]

    for result in run(main()):
        assert result.is_error is True and "unknown tool" in text_of(result)
    assert "read_image" not in text_of(run(main())[1]).split("available:")[1]


def test_in_process_client_drives_the_toy_robot_to_a_finish(toolkit: ToyToolkit, tmp_path: Path) -> None:
    async def main() -> list[mcp.types.CallToolResult]:
        async with mcp.Client(build_mcp_server(toolkit)) as client:
            return await solve(client)

    results = run(main())
    assert [r.is_error for r in results] == [False] * len(TOY_SOLUTION)
    assert toolkit.finish_result == {"status": "success", "summary": "red block is in the bin",
                                     "operator_aborted": False, "operator_notes": []}
    assert toolkit.solved() is True
    assert [s["tool"] for s in read_steps(tmp_path / "run")] == TOY_SOLUTION_NAMES


# -- streamable HTTP ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 per-request wire, and the handshake era
def test_http_client_drives_the_toy_robot_to_a_finish(toolkit: ToyToolkit, tmp_path: Path, mode: str) -> None:
    async def main(url: str) -> list[mcp.types.CallToolResult]:
        async with mcp.Client(url, mode=mode) as client:
            return await solve(client)

    with McpHttpServer(build_mcp_server(toolkit), port=0) as http:
        assert http.url == f"http://127.0.0.1:{http.port}/mcp" and http.port > 0
        results = run(main(http.url))
    assert [s["tool"] for s in read_steps(tmp_path / "run")] == TOY_SOLUTION_NAMES
    assert toolkit.solved() is True
    moves = [r for (name, _), r in zip(TOY_SOLUTION, results, strict=True) if name == "move_to"]
    assert all(base64.b64decode(r.content[1].data).startswith(PNG_SIGNATURE) for r in moves)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_cancelling_an_http_request_stops_exactly_that_call(tmp_path: Path, events: EventLog, mode: str) -> None:
    world = ToyWorld(speed_m_s=SLOW)
    toolkit = ToyToolkit(robot=world, output_dir=tmp_path / "run", dashboard_events=events)
    start = list(world.gripper_xyz)

    async def main(url: str) -> tuple[mcp.types.CallToolResult, mcp.types.CallToolResult]:
        async with mcp.Client(url, mode=mode) as client:
            moving = asyncio.ensure_future(client.call_tool("move_to", FAR_TARGET))
            await asyncio.to_thread(events.wait_for, "tool_started", "move_to")
            # A read-only call queued behind the motion must survive the motion's cancellation.
            queued = asyncio.ensure_future(client.call_tool("get_state", {}))
            moving.cancel()
            with pytest.raises(asyncio.CancelledError):
                await moving
            finished = await asyncio.to_thread(events.wait_for, "tool_finished", "move_to")
            assert finished["error"].startswith("cancelled")
            state = await queued
            return state, await client.call_tool("get_state", {})

    try:
        with McpHttpServer(build_mcp_server(toolkit), port=0) as http:
            after_cancel, later = run(main(http.url))
    finally:
        toolkit.close(timeout=10)
    assert world.stops == 1
    assert after_cancel.is_error is False and json.loads(text_of(after_cancel)) == json.loads(text_of(later))
    position = json.loads(text_of(later))["gripper_xyz_m"]
    assert position != [FAR_TARGET["x_m"], FAR_TARGET["y_m"], FAR_TARGET["z_m"]]
    assert abs(position[0] - start[0]) < 0.2  # stopped early, far from the target
    steps = read_steps(tmp_path / "run")
    assert [(s["tool"], s["cancelled"]) for s in steps] == [("move_to", True), ("get_state", False), ("get_state", False)]


@pytest.mark.slow
def test_cancelling_a_queued_request_drops_it_and_leaves_the_running_call_alone(tmp_path: Path,
                                                                               events: EventLog) -> None:
    world = ToyWorld(speed_m_s=SLOW)
    toolkit = ToyToolkit(robot=world, output_dir=tmp_path / "run", dashboard_events=events)

    async def main(url: str) -> None:
        async with mcp.Client(url) as client:
            queued_seen = anyio.Event()

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                if message == "queued":
                    queued_seen.set()

            moving = asyncio.ensure_future(client.call_tool("move_to", FAR_TARGET))
            await asyncio.to_thread(events.wait_for, "tool_started", "move_to")
            second = asyncio.ensure_future(client.call_tool("release", {}, progress_callback=on_progress))
            with anyio.fail_after(10):
                await queued_seen.wait()
            second.cancel()
            with pytest.raises(asyncio.CancelledError):
                await second
            # The drop is logged when the server sees the cancellation (for the 2026 wire: the closed stream).
            await asyncio.to_thread(wait_until, lambda: len(read_steps(tmp_path / "run")) == 1)
            assert not [p for k, p in events.events if k == "tool_finished" and p["tool"] == "move_to"]
            moving.cancel()
            with pytest.raises(asyncio.CancelledError):
                await moving
            await asyncio.to_thread(events.wait_for, "tool_finished", "move_to")

    try:
        with McpHttpServer(build_mcp_server(toolkit), port=0) as http:
            run(main(http.url))
    finally:
        toolkit.close(timeout=10)
    steps = read_steps(tmp_path / "run")
    assert [s["tool"] for s in steps] == ["release", "move_to"]
    assert steps[0]["error"].startswith("cancelled before it started")
    assert steps[1]["error"].startswith("cancelled") and world.stops == 1
    assert world.gripper_open is True and world.holding is None  # release never ran


def test_http_server_refuses_a_non_loopback_host(toolkit: ToyToolkit) -> None:
    with pytest.raises(ValueError, match=r"--host: '0\.0\.0\.0' is not a loopback address"):
        McpHttpServer(build_mcp_server(toolkit), host="0.0.0.0")


# -- stdio (the server as a subprocess, as Claude Code and Codex start it) ------------------------


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # Claude Code and Codex speak the handshake era
def test_stdio_client_drives_the_toy_robot_to_a_finish(tmp_path: Path, mode: str) -> None:
    out = tmp_path / "served"

    async def main() -> tuple[list[str], list[mcp.types.CallToolResult]]:
        async with mcp.Client(toy_stdio_params(out), mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            return names, await solve(client)

    names, results = run(main())
    assert names[:7] == ["move_to", "grasp", "release", "get_state", "capture_image", "observe", "finish"]
    assert [r.is_error for r in results] == [False] * len(TOY_SOLUTION)
    steps = read_steps(out)
    assert [s["tool"] for s in steps] == TOY_SOLUTION_NAMES
    image = results[TOY_SOLUTION_NAMES.index("capture_image")]
    saved = text_of(image).split("(open them to view): ", 1)[1]
    assert Path(saved).read_bytes() == base64.b64decode(image.content[1].data)
    assert (out / "episode.mp4").is_file()  # the server closed its toolkit when the client left


@pytest.mark.slow
def test_cancelling_a_stdio_request_stops_the_motion_and_the_server_keeps_serving(tmp_path: Path) -> None:
    out = tmp_path / "served"

    async def main() -> list[mcp.types.CallToolResult]:
        async with mcp.Client(toy_stdio_params(out, "--speed", str(SLOW))) as client:
            moving = await far_move_running(client)
            moving.cancel()
            with pytest.raises(asyncio.CancelledError):
                await moving
            # Queued behind the motion until it has returned, so this reads the stopped arm.
            first = await client.call_tool("get_state", {})
            await asyncio.sleep(0.3)  # an observation window: a still-moving arm would move ~6 mm
            return [first, await client.call_tool("get_state", {})]

    first, second = run(main())
    assert json.loads(text_of(first)) == json.loads(text_of(second))
    assert json.loads(text_of(first))["gripper_xyz_m"] != [FAR_TARGET["x_m"], FAR_TARGET["y_m"], FAR_TARGET["z_m"]]
    steps = read_steps(out)
    assert [(s["tool"], s["cancelled"]) for s in steps] == [("move_to", True), ("get_state", False), ("get_state", False)]
    assert steps[0]["error"].startswith("cancelled")
