"""Cancelling a Franka motion that waits for the operator ends the call at once, moves nothing, and
a late approve of the id the operator saw is refused (issue 12). In the in-process simulator."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from robots.franka.runtime import FrankaRuntime
from robots.franka.safety import SafetyEnvelope
from robots.franka.toolkit import FrankaToolkit
from rpent.dashboard.interaction import OperatorInteraction, StaleRequest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

APPROVAL_TIMEOUT_S = 30.0
BOUND_S = 5.0  # far below the approval timeout: a call that ends within it was not timed out


@pytest.fixture
def operator(sim_runtime: FrankaRuntime) -> Iterator[tuple[OperatorInteraction, threading.Event]]:
    """The dashboard's approval channel on the simulated arm, which now requires approval."""
    opened = threading.Event()
    interaction = OperatorInteraction(lambda kind, _payload: opened.set() if kind == "operator_request" else None)
    arm = sim_runtime.arm()
    original = arm.envelope
    limits = original.limits.model_copy(update={"require_approval": True, "approval_timeout_s": APPROVAL_TIMEOUT_S})
    arm.envelope = SafetyEnvelope(limits, arm.name)
    sim_runtime.approval = interaction
    try:
        yield interaction, opened
    finally:
        arm.envelope = original
        sim_runtime.approval = None


def test_cancel_while_awaiting_approval_ends_the_call_and_nothing_moves(
    sim_runtime: FrankaRuntime, operator, tmp_path: Path
) -> None:
    interaction, opened = operator
    arm = sim_runtime.arm()
    kit = FrankaToolkit(robot=sim_runtime, output_dir=tmp_path)
    try:
        before = arm.state().joints
        call = kit.submit("move_by", {"dz_m": -0.05})
        assert opened.wait(BOUND_S), "the motion never asked for approval"
        request_id = interaction.pending()[0]["id"]
        cancelled_at = time.monotonic()
        assert kit.cancel(call.id, "cancelled by the planner")
        result = call.result(timeout=BOUND_S)
        print(f"cancel-during-approval: call ended {1000 * (time.monotonic() - cancelled_at):.1f} ms after the cancel")
        assert result.error is not None and result.error.startswith("cancelled"), result.error
        with pytest.raises(StaleRequest):
            interaction.respond(request_id, approve=True)
        assert interaction.pending() == []
        after = arm.state().joints
        assert max(abs(a - b) for a, b in zip(after, before, strict=True)) < 1e-4
    finally:
        kit.close(timeout=30)
