"""Robot-agnostic tools that reach the operator through the dashboard.

A robot offers `ask_operator` by listing it in its toolkit's tools and putting the interaction
handle into the toolkit state in `get_toolkit`:

    Toolkit(..., state={OPERATOR_STATE_KEY: interaction_from(dashboard_events)})
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from rpent.dashboard.interaction import OperatorInteraction
from rpent.tools import ToolContext, ToolResult, tool

OPERATOR_STATE_KEY = "dashboard_interaction"


@tool
def ask_operator(
    question: Annotated[str, Field(min_length=1, max_length=2000)],
    timeout_s: Annotated[float, Field(gt=0, le=1800)] = 300.0,
    *,
    ctx: ToolContext,
) -> ToolResult:
    """Ask the human operator a question and wait for the typed answer.

    Use it when the task is ambiguous or the scene is not what the task describes. The robot
    does not move while waiting.

    Args:
        question: The question, in one or two sentences.
        timeout_s: How long to wait for an answer, in seconds (default 300).
    """
    operator = ctx.state.get(OPERATOR_STATE_KEY)
    if not isinstance(operator, OperatorInteraction):
        return ToolResult(error="no operator is connected (the dashboard is not running)")
    ctx.check_cancelled()
    answer = operator.ask(question, timeout_s)
    ctx.check_cancelled()
    if answer is None:
        return ToolResult(data={"answer": None}, error="the operator did not answer in time")
    result: dict[str, Any] = {"answer": answer}
    return ToolResult(data=result)
