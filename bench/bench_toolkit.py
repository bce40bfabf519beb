"""Executor overhead per call for a no-op tool, next to calling the handler directly with the same validation.

Prints, for exclusive and read-only no-op tools with 1 and 8 calling threads, the microseconds per call
through `Toolkit.execute_tool` and through `Tool.validate` + the handler directly, and the ratio of the
executor's added cost to that baseline (target: added cost < 2x the baseline).

    python bench/bench_toolkit.py [--calls 20000]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from typing import Any

from rpent.tools import ToolContext, Toolkit, readonly, tool


@tool
def noop(x: int = 0, *, ctx: ToolContext[Any]) -> dict[str, Any]:
    """Do nothing.

    Args:
        x: Ignored.
    """
    return {}


@tool
@readonly
def noop_ro(x: int = 0, *, ctx: ToolContext[Any]) -> dict[str, Any]:
    """Do nothing, read-only.

    Args:
        x: Ignored.
    """
    return {}


def _per_call_us(fn, calls: int, threads: int) -> float:
    per_thread = calls // threads
    barrier = threading.Barrier(threads + 1)

    def worker() -> None:
        barrier.wait()
        for i in range(per_thread):
            fn(i)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    t0 = time.perf_counter()
    for w in workers:
        w.join()
    return (time.perf_counter() - t0) / (per_thread * threads) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    kit = Toolkit(tools=[noop, noop_ro])

    print(f"{'tool':10} {'threads':>7} {'direct us':>10} {'toolkit us':>11} {'added us':>9} {'added/direct':>13}")
    for the_tool in (noop, noop_ro):
        def direct(i: int, t=the_tool) -> Any:
            model = t.validate({"x": i})
            return t.fn(**model.__dict__, ctx=None)

        def through(i: int, name=the_tool.name) -> Any:
            return kit.execute_tool(name, {"x": i})

        for threads in (1, 8):
            d = statistics.median(_per_call_us(direct, args.calls, threads) for _ in range(args.repeats))
            k = statistics.median(_per_call_us(through, args.calls, threads) for _ in range(args.repeats))
            added = k - d
            print(f"{the_tool.name:10} {threads:7d} {d:10.2f} {k:11.2f} {added:9.2f} {added / d:13.2f}x")
    kit.close()


if __name__ == "__main__":
    main()
