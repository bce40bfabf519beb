"""LIBERO benchmark: env_server step and render cost, the process boundary, and whether the tools suffice.

    python bench/bench_libero.py [--steps 60] [--tasks 10] [--suites libero_object libero_spatial] [--skip-sweep]

Part 1 starts one env_server (libero_object task 0) and times, per call over RPC (socket):
a physics step without rendering, a step plus one 128 px agentview frame (what motion tools
record), a step plus both 256 px cameras (an observation), and each camera render alone.
Part 2 runs the same calls on an in-process LiberoEnvFacade (no server), interleaved round by
round with the RPC calls so load from other jobs hits both alike, giving the RPC / in-process
ratio. (Two envs, ~2 GB each, exist during part 2 only.)
Part 3 runs the scripted pick-and-place (robots/libero/scripted.py, tools only) on the first
`--tasks` tasks of each suite through env_server + toolkit and reports how many are solved
according to LIBERO's own check_success(), one env process at a time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from robots.libero.env_server import LiberoEnvClient, LiberoEnvFacade
from robots.libero.sim import LiberoSim
from rpent.rpc import ServerProcess

HOLD = np.array([0, 0, 0, 0, 0, 0, -1.0])


def interleaved_ms(ops: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median milliseconds of each op, rounds interleaved so load from other jobs hits all alike."""
    samples: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(rounds):
        for name, fn in ops.items():
            start = time.perf_counter()
            fn()
            samples[name].append((time.perf_counter() - start) * 1000)
    return {name: statistics.median(values) for name, values in samples.items()}


def operations(env) -> dict[str, Callable[[], object]]:
    """The timed operations on an env (an RPC client or the in-process facade)."""
    return {
        "step": lambda: env.step(HOLD),
        "step + agentview 128": lambda: (env.step(HOLD), env.render("agentview", width=128, height=128)),
        "step + both cameras 256": lambda: (
            env.step(HOLD),
            env.render("agentview", width=256, height=256),
            env.render("robot0_eye_in_hand", width=256, height=256),
        ),
        "render agentview 128": lambda: env.render("agentview", width=128, height=128),
        "render agentview 256": lambda: env.render("agentview", width=256, height=256),
        "render wrist 256": lambda: env.render("robot0_eye_in_hand", width=256, height=256),
        "segment agentview 256": lambda: env.segment("agentview", 256, 256),
        "success": env.success,
    }


def warm_up(env) -> None:
    env.reset()
    for op in operations(env).values():  # first renders allocate GL buffers
        op()


def part_latency(rounds: int) -> None:
    # Two envs exist for this part only (~2 GB each): the in-process one and the server's.
    print("== env_server latency (libero_object task 0), median ms per call ==", flush=True)
    started = time.perf_counter()
    server = ServerProcess(
        "robots.libero.env_server",
        "socket://127.0.0.1:0",
        args=["--suite", "libero_object", "--task-id", "0"],
        ready_timeout_s=300,
    )
    server.start()
    print(f"env_server start (env creation + reset): {time.perf_counter() - started:.1f} s", flush=True)
    local_env = LiberoEnvFacade(LiberoSim("libero_object", 0))
    try:
        with LiberoEnvClient(server.endpoint) as client:
            start = time.perf_counter()
            client.reset()
            print(f"reset over RPC: {(time.perf_counter() - start) * 1000:.0f} ms", flush=True)
            warm_up(client)
            warm_up(local_env)
            remote_ops, local_ops = operations(client), operations(local_env)
            figures = interleaved_ms(
                {**{("rpc", k): v for k, v in remote_ops.items()}, **{("local", k): v for k, v in local_ops.items()}},
                rounds,
            )
    finally:
        local_env.close()
        server.stop()
    print(f"{'operation':<26}{'rpc socket':>12}{'in-process':>12}{'rpc extra':>11}{'ratio':>8}")
    for name in remote_ops:
        rpc_ms, local_ms = figures[("rpc", name)], figures[("local", name)]
        ratio = f"{rpc_ms / local_ms:>8.2f}" if local_ms >= 1.0 else f"{'-':>8}"
        print(f"{name:<26}{rpc_ms:>12.1f}{local_ms:>12.1f}{rpc_ms - local_ms:>11.1f}{ratio}")
    step, observed = figures[("rpc", "step")], figures[("rpc", "step + both cameras 256")]
    print(f"rendering share of a step with an observation (rpc): {(observed - step) / observed:.0%}", flush=True)


def part_sweep(suites: list[str], tasks: int) -> None:
    from robots.libero import get_robot_spec, get_toolkit
    from robots.libero.scripted import pick_and_place
    from rpent.dashboard.events import NullEventSink

    spec = get_robot_spec()
    print(f"== scripted pick-and-place through env_server + tools: first {tasks} tasks ==", flush=True)
    out_root = Path(tempfile.mkdtemp(prefix="bench_libero_"))
    totals: dict[str, int] = {}
    for suite in suites:
        solved = 0
        for task_id in range(tasks):
            parser = argparse.ArgumentParser()
            spec.add_cli_args(parser)
            args = parser.parse_args(["--suite", suite, "--task-id", str(task_id)])
            args.output_dir = str(out_root / f"{suite}_{task_id}")
            config = spec.parse_config(args)
            started = time.perf_counter()
            runtime: dict = {}
            note = ""
            ok = False
            try:
                runtime = spec.init_runtime(config, events=NullEventSink())
                ready = time.perf_counter() - started
                toolkit = get_toolkit(runtime_kwargs=runtime, dashboard_events=None, config=config)
                outcome = pick_and_place(toolkit)
                toolkit.close()
                ok = outcome.solved
                failed = [name for name, good in outcome.calls if not good]
                note = "; ".join(filter(None, [outcome.note, f"failed calls: {failed}" if failed else ""]))
                note = f"goal {outcome.goal}" + (f"; {note}" if note else "")
            except Exception as exc:  # a task the script cannot handle is a data point, not a crash
                ready = float("nan")
                note = f"{type(exc).__name__}: {exc}"
            finally:
                spec.stop_runtime(runtime)
            solved += ok
            total_s = time.perf_counter() - started
            print(
                f"{suite} task {task_id}: {'SOLVED' if ok else 'failed'} "
                f"(server ready {ready:.0f} s, total {total_s:.0f} s) {config.task!r} {note}",
                flush=True,
            )
        totals[suite] = solved
    for suite, solved in totals.items():
        print(f"scripted tool sequence solved {solved}/{tasks} of the first {tasks} {suite} tasks")
    print(f"videos and step logs: {out_root}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="timed calls per operation (default 60)")
    parser.add_argument("--tasks", type=int, default=10, help="tasks per suite in the sweep (default 10)")
    parser.add_argument("--suites", nargs="+", default=["libero_object", "libero_spatial"])
    parser.add_argument("--skip-sweep", action="store_true", help="latency figures only")
    parser.add_argument("--skip-latency", action="store_true", help="sweep only")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2-core machine shared with other jobs)")
    if not args.skip_latency:
        part_latency(args.steps)
    if not args.skip_sweep:
        part_sweep(args.suites, args.tasks)


if __name__ == "__main__":
    main()
