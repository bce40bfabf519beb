"""How much time the api planner's own loop adds per turn.

Per turn we measure, on the scripted model server's clock, the gap between the last byte of a
model reply and the arrival of the next request: the planner reading the stream's tail, running a
no-op tool through the toolkit, building the next request, and the HTTP hop. The same gap for a
bare anthropic SDK loop (no planner, no tool) is the floor measured in the same run; the server's
own time per request is shown beside it.

With --cli, the same gap for the claude_code and codex planners (real CLIs, the toolkit served
over the planner's MCP bridge), against a floor of the same CLI with the same flags driving the
same toolkit through a plain rpent.mcp HTTP server, started directly (no planner).

Run: . .venv/bin/activate && python bench/bench_planner.py [--turns 60] [--cli [--cli-turns 20]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anthropic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

import itertools

from fakes import FakeModelServer, RecordedRequest, Reply, Text, ToolUse

from rpent.planner.api import ApiPlanner
from rpent.tools import ToolContext, Toolkit, finish_payload, readonly, tool


@tool
@readonly
def noop(*, ctx: ToolContext) -> dict:
    """Do nothing."""
    return {}


@tool
def finish(status: str, summary: str, *, ctx: ToolContext) -> dict:
    """End the task.

    Args:
        status: success or failure.
        summary: What happened.
    """
    return finish_payload(status=status, summary=summary)


class BenchToolkit(Toolkit):
    tools = (noop, finish)


def _gaps(requests: list[RecordedRequest]) -> list[float]:
    return [nxt.received_at - prev.finished_at for prev, nxt in itertools.pairwise(requests)
            if prev.finished_at is not None]


def _server_costs(requests: list[RecordedRequest]) -> list[float]:
    return [r.finished_at - r.received_at for r in requests if r.finished_at is not None]


def planner_loop(turns: int) -> tuple[list[float], list[float], float]:
    with FakeModelServer() as server:
        server.script(*[Reply([Text("step"), ToolUse("noop")]) for _ in range(turns)],
                      Reply([ToolUse("finish", {"status": "success", "summary": "bench"})]))
        toolkit = BenchToolkit()
        planner = ApiPlanner(model="fake-model", base_url=server.base_url, api_key="bench")
        started = time.perf_counter()
        result = planner.solve(system_prompt="bench", user_message="go", toolkit=toolkit, max_turns=turns + 1)
        wall = time.perf_counter() - started
        toolkit.close()
        server.raise_errors()
        assert result.finished, result.stop_reason
        requests = server.model_requests
    return _gaps(requests), _server_costs(requests), wall


def sdk_floor(turns: int) -> tuple[list[float], list[float]]:
    """A bare async SDK loop sending the same tools and growing conversation, with no planner."""
    toolkit = BenchToolkit()
    tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
             for t in toolkit.list_tools()]
    toolkit.close()
    with FakeModelServer() as server:
        server.script(*[Reply([Text("step"), ToolUse("noop", id=f"toolu_{i}")]) for i in range(turns)])

        async def run() -> None:
            async with anthropic.AsyncAnthropic(base_url=server.base_url, api_key="bench", max_retries=0) as client:
                messages: list[dict] = [{"role": "user", "content": "go"}]
                for i in range(turns):
                    async with client.messages.stream(model="fake-model", max_tokens=1024, system="bench",
                                                      tools=tools, messages=messages) as stream:
                        await stream.get_final_message()
                    messages += [
                        {"role": "assistant", "content": [{"type": "text", "text": "step"},
                                                          {"type": "tool_use", "id": f"toolu_{i}", "name": "noop",
                                                           "input": {}}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                                      "content": [{"type": "text", "text": "{}"}]}]},
                    ]

        asyncio.run(run())
        server.raise_errors()
        requests = server.model_requests
    return _gaps(requests), _server_costs(requests)


def _cli_script(server: FakeModelServer, turns: int, namespace: str | None, prefix: str) -> None:
    name = (lambda tool: f"mcp__robot__{tool}") if namespace is None else (lambda tool: tool)
    server.script(*[Reply([Text("step"), ToolUse(name("noop"), namespace=namespace)]) for _ in range(turns)],
                  Reply([ToolUse(name("finish"), {"status": "success", "summary": "bench"}, namespace=namespace)]))
    server.when_exhausted = Reply([Text("done")])


def cli_planner_loop(planner_name: str, turns: int) -> list[float]:
    from rpent.planner.base import build_planner

    with FakeModelServer() as server:
        codex = planner_name == "codex"
        _cli_script(server, turns, "mcp__robot" if codex else None, planner_name)
        with tempfile.TemporaryDirectory() as out:
            toolkit = BenchToolkit(output_dir=Path(out))
            base_url = f"{server.base_url}/v1" if codex else server.base_url
            planner = build_planner(planner_name, model="gpt-fake" if codex else "claude-sonnet-4-5",
                                    base_url=base_url, api_key="bench")
            result = planner.solve(system_prompt="bench", user_message="go", toolkit=toolkit, max_turns=turns + 1)
            toolkit.close()
        assert result.finished, (result.stop_reason, result.error)
        return _gaps(server.model_requests[: turns + 1])


def cli_floor(planner_name: str, turns: int) -> list[float]:
    """The same CLI and flags, started directly against a plain MCP HTTP server of the same toolkit."""
    from rpent.mcp import McpHttpServer, build_mcp_server
    from rpent.planner.claude_code import ClaudeCodePlanner
    from rpent.planner.codex import CodexPlanner

    codex = planner_name == "codex"
    with FakeModelServer() as server, tempfile.TemporaryDirectory() as scratch:
        _cli_script(server, turns, "mcp__robot" if codex else None, planner_name)
        toolkit = BenchToolkit(output_dir=Path(scratch) / "run")
        home = Path(scratch) / "home"
        home.mkdir()
        with McpHttpServer(build_mcp_server(toolkit, name="robot"), port=0) as http:
            if codex:
                planner = CodexPlanner(model="gpt-fake", base_url=f"{server.base_url}/v1", api_key="bench")
                instructions = Path(scratch) / "instructions.md"
                instructions.write_text("bench")
                (home / "config.toml").write_text(planner.config_toml(
                    mcp_url=http.url, instructions_file=instructions, writable_roots=[]))
                command = [planner.codex_bin, "exec", "--json", "--skip-git-repo-check", "-C", str(toolkit.output_dir), "go"]
                env = dict(os.environ, CODEX_HOME=str(home), OPENAI_API_KEY="bench")
            else:
                planner = ClaudeCodePlanner(base_url=server.base_url, api_key="bench")
                import claude_agent_sdk

                cli = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
                config = Path(scratch) / "mcp.json"
                config.write_text(json.dumps({"mcpServers": {"robot": {"type": "http", "url": http.url}}}))
                command = [str(cli), "-p", "go", "--output-format", "stream-json", "--verbose", "--mcp-config",
                           str(config), "--strict-mcp-config", "--allowedTools", "mcp__robot__noop,mcp__robot__finish",
                           "--tools", "Read", "--system-prompt", "bench", "--model", "claude-sonnet-4-5",
                           "--setting-sources="]
                env = dict(os.environ, **planner.cli_env(home))
            subprocess.run(command, env=env, cwd=toolkit.output_dir, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=300, check=True)
        toolkit.close()
        assert toolkit.finish_result is not None, "the floor run did not finish"
        return _gaps(server.model_requests[: turns + 1])


def toolkit_noop_cost(n: int = 200) -> float:
    toolkit = BenchToolkit()
    started = time.perf_counter()
    for _ in range(n):
        toolkit.execute_tool("noop", {})
    elapsed = (time.perf_counter() - started) / n
    toolkit.close()
    return elapsed


def _ms(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[int(0.9 * (len(ordered) - 1))]
    return f"median {statistics.median(values) * 1e3:7.3f} ms   p90 {p90 * 1e3:7.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3, help="alternating floor/planner rounds")
    parser.add_argument("--cli", action="store_true", help="also measure the claude_code and codex planners")
    parser.add_argument("--cli-turns", type=int, default=20)
    args = parser.parse_args()

    planner_loop(5)  # warm-up: imports, first connections
    sdk_floor(5)
    floor_gaps: list[float] = []
    floor_server: list[float] = []
    gaps: list[float] = []
    server_costs: list[float] = []
    wall = 0.0
    # Alternate so that load from other processes on the machine hits both sides alike.
    for _ in range(args.rounds):
        f_gaps, f_server = sdk_floor(args.turns)
        p_gaps, p_server, p_wall = planner_loop(args.turns)
        floor_gaps += f_gaps
        floor_server += f_server
        gaps += p_gaps
        server_costs += p_server
        wall += p_wall / args.rounds
    noop_cost = toolkit_noop_cost()

    floor = statistics.median(floor_gaps)
    own = statistics.median(gaps)
    print(f"api planner, {args.turns} turns with a no-op tool (wall {wall:.2f} s, {wall / (args.turns + 1) * 1e3:.2f} ms/turn)")
    print(f"  planner gap  reply received -> next request : {_ms(gaps)}")
    print(f"  floor gap    bare SDK loop, same transport  : {_ms(floor_gaps)}")
    print(f"  planner own overhead (median gap - floor)   : {(own - floor) * 1e3:7.3f} ms   ratio to floor {own / floor:5.2f}x")
    print(f"  of which toolkit.execute_tool(no-op), sync  : {noop_cost * 1e3:7.3f} ms")
    print(f"  fake server per request (planner run)       : {_ms(server_costs)}")
    print(f"  fake server per request (floor run)         : {_ms(floor_server)}")
    if args.cli:
        for name in ("claude_code", "codex"):
            cli_planner_loop(name, 3)  # warm-up
            planner_gaps: list[float] = []
            cli_floor_gaps: list[float] = []
            for _ in range(args.rounds):
                cli_floor_gaps += cli_floor(name, args.cli_turns)
                planner_gaps += cli_planner_loop(name, args.cli_turns)
            own, floor = statistics.median(planner_gaps), statistics.median(cli_floor_gaps)
            print(f"{name} planner, {args.cli_turns} turns with a no-op tool, {args.rounds} rounds")
            print(f"  planner gap  reply received -> next request : {_ms(planner_gaps)}")
            print(f"  floor gap    same CLI, plain MCP server     : {_ms(cli_floor_gaps)}")
            print(f"  planner own overhead (median gap - floor)   : {(own - floor) * 1e3:7.3f} ms   ratio to floor {own / floor:5.2f}x")


if __name__ == "__main__":
    main()
