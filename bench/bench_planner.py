"""How much time the api planner's own loop adds per turn.

Per turn we measure, on the scripted model server's clock, the gap between the last byte of a
model reply and the arrival of the next request: the planner reading the stream's tail, running a
no-op tool through the toolkit, building the next request, and the HTTP hop. The same gap for a
bare anthropic SDK loop (no planner, no tool) is the floor measured in the same run; the server's
own time per request is shown beside it.

Run: . .venv/bin/activate && python bench/bench_planner.py [--turns 60]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
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


if __name__ == "__main__":
    main()
