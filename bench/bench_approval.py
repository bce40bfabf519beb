"""Cancel-during-approval latency: from a tool call's cancel to the end of its approval wait.

Per trial a request waits for an operator who never answers (30 s timeout), then the call's
cancel token is set. Measured:

- dashboard: `OperatorInteraction.request` (the dashboard's channel) returns;
- cli-pty:   `CliApprovalChannel.request` on a pseudo-terminal returns;
- franka:    a Franka `move_by` waiting for approval in franky-sim, cancelled through
             `Toolkit.cancel`: the approval request closed, and the call's result (which includes
             the observation after the call). Also: the largest joint displacement over the trials
             and whether a late approve of each retired id was refused.

    MUJOCO_GL=egl python bench/bench_approval.py [--trials 20] [--no-sim]
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from robots.franka.approval import CliApprovalChannel
from rpent.dashboard.interaction import OperatorInteraction, StaleRequest
from rpent.runtime.arm import ApprovalChannel, OnCancel
from rpent.tools.context import CancelToken

TIMEOUT_S = 30.0


def summary(name: str, seconds: list[float]) -> str:
    values = sorted(seconds)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return (
        f"{name:<38} median {1000 * statistics.median(values):7.2f} ms   p90 {1000 * p90:7.2f} ms   "
        f"max {1000 * values[-1]:7.2f} ms   n={len(values)}"
    )


def hook(token: CancelToken) -> OnCancel:
    def on_cancel(callback: Callable[[], object]) -> Callable[[], None]:
        token.add_callback(callback)
        return lambda: token.remove_callback(callback)

    return on_cancel


class _Asked(io.StringIO):
    """CLI output that signals once the question is on the screen."""

    def __init__(self) -> None:
        super().__init__()
        self.event = threading.Event()

    def flush(self) -> None:
        if "approve?" in self.getvalue():
            self.event.set()


def cancel_latency(channel: ApprovalChannel, asked: threading.Event) -> float:
    """Seconds from setting the cancel token to `channel.request` returning in its own thread."""
    token, returned = CancelToken(), []
    waiter = threading.Thread(
        target=lambda: (
            channel.request("1", "bench motion", TIMEOUT_S, on_cancel=hook(token)),
            returned.append(time.perf_counter()),
        )
    )
    waiter.start()
    if not asked.wait(10):
        raise RuntimeError("the channel never asked")
    cancelled = time.perf_counter()
    token.set("bench cancel")
    waiter.join(10)
    if not returned:
        raise RuntimeError("the request did not return after the cancel")
    return returned[0] - cancelled


def bench_dashboard(trials: int) -> list[float]:
    times = []
    for _ in range(trials):
        asked = threading.Event()
        operator = OperatorInteraction(
            lambda kind, _p, asked=asked: asked.set() if kind == "operator_request" else None
        )
        times.append(cancel_latency(operator, asked))
    return times


def bench_cli(trials: int) -> list[float]:
    master, slave = os.openpty()
    stream = os.fdopen(slave, "r")
    try:
        times = []
        for _ in range(trials):
            screen = _Asked()
            times.append(cancel_latency(CliApprovalChannel(stream, screen), screen.event))
        return times
    finally:
        stream.close()
        os.close(master)


def bench_franka(trials: int) -> None:
    from robots.franka.config import FrankaConfig
    from robots.franka.runtime import build_runtime
    from robots.franka.safety import SafetyEnvelope
    from robots.franka.toolkit import FrankaToolkit

    runtime = build_runtime(FrankaConfig(), sim=True)
    arm = runtime.arm()
    arm.envelope = SafetyEnvelope(
        arm.envelope.limits.model_copy(update={"require_approval": True, "approval_timeout_s": TIMEOUT_S}), arm.name
    )
    kit = FrankaToolkit(robot=runtime)
    closed_at: list[float] = []
    opened = threading.Event()

    def publish(kind: str, _payload: dict) -> None:
        if kind == "operator_request":
            opened.set()
        elif kind == "operator_request_closed":
            closed_at.append(time.perf_counter())

    runtime.approval = operator = OperatorInteraction(publish)
    to_close, to_result, moved, refused = [], [], 0.0, 0
    try:
        for _ in range(trials):
            opened.clear()
            closed_at.clear()
            before = arm.state().joints
            call = kit.submit("move_by", {"dz_m": -0.05})
            if not opened.wait(30):
                raise RuntimeError("the motion never asked for approval")
            request_id = operator.pending()[0]["id"]
            cancelled = time.perf_counter()
            kit.cancel(call.id, "bench cancel")
            result = call.result(timeout=30)
            to_result.append(time.perf_counter() - cancelled)
            to_close.append(closed_at[0] - cancelled)
            if not (result.error or "").startswith("cancelled"):
                raise RuntimeError(f"the call did not end as cancelled: {result.error!r}")
            try:
                operator.respond(request_id, approve=True)
            except StaleRequest:
                refused += 1
            moved = max(moved, *(abs(a - b) for a, b in zip(arm.state().joints, before, strict=True)))
    finally:
        kit.close(timeout=30)
        runtime.close()
    print(summary("franka: cancel -> approval closed", to_close))
    print(summary("franka: cancel -> call result", to_result))
    print(f"franka: largest joint displacement {moved:.2e} rad; late approvals refused {refused}/{trials}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--no-sim", action="store_true", help="skip the Franka simulator trials")
    args = parser.parse_args()
    # The refused late approvals are counted below; their warning per trial would bury the figures.
    logging.getLogger("rpent.dashboard.interaction").setLevel(logging.ERROR)
    print(summary("dashboard: cancel -> request returned", bench_dashboard(args.trials)))
    print(summary("cli-pty: cancel -> request returned", bench_cli(args.trials)))
    if not args.no_sim:
        bench_franka(args.trials)


if __name__ == "__main__":
    main()
