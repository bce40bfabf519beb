"""A toolkit node's client in a process of its own, for the load tests (and bench/bench_ros.py).

Sends `--calls` goals through RosToolkit, at most `--window` unfinished at a time, cycling through the
tools of `--mix` (move_to goes to the toy's start, so every motion is short), waits a bounded time for
every result, and writes a JSON summary: how many ended with each GoalStatus, the errors, and how many
never ended. Run it with the ROS environment sourced and the package built (not from the checkout).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ARGUMENTS = {"move_to": {"x_m": 0.3, "y_m": 0.3, "z_m": 0.2}, "get_state": {}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--namespace", default="/toolkit")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--mix", default="get_state", help="comma-separated tools, used in turn")
    parser.add_argument("--wait-s", type=float, default=120.0, help="bound on waiting for the last results")
    args = parser.parse_args()

    from rpent_ros.spinning import spinning_node
    from rpent_ros.toolkit.client import RosToolkit

    with spinning_node("remote_calls") as node:
        remote = RosToolkit(node, args.namespace)
        remote.wait_ready(60)
        remote.list_tools()
        tools = args.mix.split(",")
        slots = threading.BoundedSemaphore(args.window)
        calls = []
        started = time.monotonic()
        for i in range(args.calls):
            if not slots.acquire(timeout=args.wait_s):
                break  # earlier goals never ended: the summary counts what was sent
            tool = tools[i % len(tools)]
            call = remote.submit(tool, ARGUMENTS[tool],
                                 on_stage=lambda stage, *_: stage == "done" and slots.release())
            calls.append(call)
        deadline = time.monotonic() + args.wait_s
        for call in calls:
            try:
                call.result(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                pass  # counted as unfinished below
        elapsed = time.monotonic() - started
        finished = [c for c in calls if c.done()]
        names = {1: "ACCEPTED", 2: "EXECUTING", 3: "CANCELING", 4: "SUCCEEDED", 5: "CANCELED", 6: "ABORTED"}
        summary = {
            "sent": len(calls),
            "unfinished": args.calls - len(finished),
            "statuses": dict(Counter(names.get(c.status, str(c.status)) for c in finished)),
            "errors": sorted({c.result().error for c in finished if c.result().is_error})[:20],
            "elapsed_s": round(elapsed, 3),
        }
        args.report.write_text(json.dumps(summary))
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
