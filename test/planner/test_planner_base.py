"""The planner contract: async tool execution with safe cancellation, and the planner registry."""

from __future__ import annotations

import asyncio
import queue
import threading
from typing import Any

import pytest

from rpent.planner.base import (
    PLANNERS,
    AbortRequest,
    OperatorInbox,
    OperatorMessage,
    Planner,
    PlannerResult,
    PlannerStatus,
    ScriptPlanner,
    TokenUsage,
    build_planner,
    execute_tool,
)
from rpent.tools import ToolContext, Toolkit, tool

pytestmark = pytest.mark.timeout(30)


@tool
def slow_stop(*, ctx: ToolContext) -> dict:
    """A motion that takes a while to come to rest after a cancel."""
    ctx.state["started"].set()
    ctx.wait_cancelled(20.0)
    # Braking: the call must not be reported as over before this has happened.
    ctx.state["release_brake"].wait(20.0)
    ctx.state["stopped"] = True
    ctx.check_cancelled()
    return {"done": True}


@tool
def add(a: int, b: int, *, ctx: ToolContext) -> dict:
    """Add two numbers.

    Args:
        a: First.
        b: Second.
    """
    ctx.state["stage_thread"] = threading.current_thread().name
    return {"sum": a + b}


class SlowToolkit(Toolkit):
    tools = (slow_stop, add)


@pytest.fixture
def toolkit() -> Any:
    kit = SlowToolkit(state={"started": threading.Event(), "release_brake": threading.Event()})
    yield kit
    kit.close()


def test_execute_tool_returns_the_result_without_blocking_the_loop(toolkit: SlowToolkit) -> None:
    stages: list[str] = []

    async def main() -> Any:
        loop_thread = threading.current_thread().name
        result = await execute_tool(toolkit, "add", {"a": 2, "b": 3}, on_stage=lambda s, m, p: stages.append(s))
        return result, loop_thread

    result, loop_thread = asyncio.run(main())
    assert result.data == {"sum": 5} and not result.is_error
    assert toolkit.state["stage_thread"] != loop_thread
    assert stages[-1] == "done" and "running" in stages


def test_execute_tool_reports_bad_arguments_as_an_error_result(toolkit: SlowToolkit) -> None:
    result = asyncio.run(execute_tool(toolkit, "add", {"a": 1}))
    assert result.is_error and "b" in (result.error or "")


def test_cancelling_the_awaiting_task_cancels_the_call_and_waits_for_its_cleanup(toolkit: SlowToolkit) -> None:
    seen_at_cancel: dict[str, Any] = {}

    async def main() -> None:
        task = asyncio.ensure_future(execute_tool(toolkit, "slow_stop", {}))
        assert await asyncio.to_thread(toolkit.state["started"].wait, 10)
        task.cancel()
        # The call is cancelled at once, but the task must stay pending while the robot brakes.
        await asyncio.sleep(0)
        done, _ = await asyncio.wait({task}, timeout=0.2)
        seen_at_cancel["pending_while_braking"] = not done
        toolkit.state["release_brake"].set()
        with pytest.raises(asyncio.CancelledError):
            await task
        seen_at_cancel["stopped"] = toolkit.state.get("stopped")

    asyncio.run(main())
    assert seen_at_cancel == {"pending_while_braking": True, "stopped": True}


def test_a_second_cancel_does_not_cut_the_cleanup_wait_short(toolkit: SlowToolkit) -> None:
    async def main() -> bool:
        task = asyncio.ensure_future(execute_tool(toolkit, "slow_stop", {}))
        assert await asyncio.to_thread(toolkit.state["started"].wait, 10)
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.sleep(0)
        still_pending = not task.done()
        toolkit.state["release_brake"].set()
        with pytest.raises(asyncio.CancelledError):
            await task
        return still_pending and toolkit.state.get("stopped") is True

    assert asyncio.run(main())


def test_inbox_holds_messages_for_the_boundary_and_reports_abort_at_once() -> None:
    inputs: queue.Queue = queue.Queue()
    aborted = threading.Event()
    reasons: list[str] = []
    inbox = OperatorInbox(inputs, on_abort=lambda reason: (reasons.append(reason), aborted.set())).start()
    try:
        inputs.put(OperatorMessage("first"))
        inputs.put(OperatorMessage("second"))
        inputs.join()  # returns once the inbox has filed both
        assert inbox.take_messages() == ["first", "second"]
        assert inbox.take_messages() == []
        inputs.put(AbortRequest("stop now"))
        assert aborted.wait(5)
        assert reasons == ["stop now"] and inbox.abort_reason == "stop now"
    finally:
        inbox.stop()
    inputs.put(OperatorMessage("for the next run"))
    assert inputs.get_nowait() == OperatorMessage("for the next run")


def test_build_planner_names_the_known_planners_for_an_unknown_name() -> None:
    with pytest.raises(ValueError, match=r"planner: unknown planner 'gpt'.*api, claude_code, codex, replay"):
        build_planner("gpt")


def test_build_planner_accepts_a_module_and_class_path() -> None:
    created = build_planner(f"{__name__}:EchoPlanner", label="x")
    assert isinstance(created, EchoPlanner) and created.label == "x"


def test_build_planner_rejects_a_class_that_is_not_a_planner() -> None:
    with pytest.raises(ValueError, match="not a Planner subclass"):
        build_planner(f"{__name__}:SlowToolkit")


class CountingScript(ScriptPlanner):
    def __init__(self) -> None:
        self.runs: list[tuple[Any, int]] = []

    def run(self, toolkit: Any, max_turns: int, input_queue: Any) -> PlannerResult:
        self.runs.append((toolkit, max_turns))
        return PlannerResult(PlannerStatus.MODEL_ENDED, "script over")


@pytest.mark.parametrize("max_turns", [0, -1, True, 2.0])
def test_a_script_planner_refuses_a_turn_budget_the_model_planners_refuse(max_turns: Any) -> None:
    script = CountingScript()
    with pytest.raises(ValueError, match="max_turns: must be an integer >= 1"):
        script.solve(system_prompt="s", user_message="u", toolkit=Toolkit(), max_turns=max_turns)
    assert script.runs == []


def test_a_script_planner_runs_its_script_with_the_toolkit_and_budget_it_was_given() -> None:
    script, toolkit = CountingScript(), Toolkit()
    result = script.solve(system_prompt="ignored", user_message="ignored", toolkit=toolkit, max_turns=3)
    assert result.stop_reason == "script over" and script.runs == [(toolkit, 3)]


@pytest.mark.parametrize("name", ["api", "claude_code", "codex"])
def test_every_model_planner_refuses_a_missing_key_and_a_bool_count_naming_the_option(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RPENT_TEST_NO_KEY", raising=False)
    with pytest.raises(ValueError, match=r"^api_key_env: environment variable RPENT_TEST_NO_KEY is not set"):
        build_planner(name, api_key_env="RPENT_TEST_NO_KEY")
    with pytest.raises(ValueError, match=r"^end_turn_nudges: must be an integer >= 0, got True$"):
        build_planner(name, api_key="k", end_turn_nudges=True)


def test_registry_maps_every_planner_name_lazily() -> None:
    assert set(PLANNERS) == {"api", "claude_code", "codex", "replay"}


def test_planner_result_serialises_status_usage_and_finish() -> None:
    usage = TokenUsage(input_tokens=10, output_tokens=5, cache_read_input_tokens=100)
    result = PlannerResult(PlannerStatus.FINISHED, "finish accepted", {"status": "success"}, turns=2, usage=usage)
    assert result.finished
    assert result.to_dict() == {
        "status": "finished", "stop_reason": "finish accepted", "finish_result": {"status": "success"},
        "turns": 2, "error": None,
        "usage": {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 100, "total_tokens": 115},
    }


class EchoPlanner(Planner):
    def __init__(self, label: str) -> None:
        self.label = label

    def solve(self, **kwargs: Any) -> PlannerResult:  # type: ignore[override]
        return PlannerResult(PlannerStatus.MODEL_ENDED, self.label)
