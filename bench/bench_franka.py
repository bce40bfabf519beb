"""Franka toolkit figures against franky-sim in this process.

Prints: tool-call latency of get_state and capture_images, frames per second of each simulated
camera, and for cancelling a long move through the toolkit: cancel -> stop command sent,
cancel -> call returned, cancel -> arm settled, next to a bare franky `robot.stop()` on the same
arm in the same run (stop -> join_motion raised, stop -> settled). Then the simulator's clock under
load: the same moves with 0 and 2 busy loops beside, the simulator in lock-step with its client and
on the wall clock, as simulated seconds per wall second, the moves' durations on the robot's clock,
and the motions franky's generator gave up on (planned again).

    MUJOCO_GL=egl python bench/bench_franka.py [--trials 5] [--calls 30] [--clock-moves 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from timing import timed_calls  # bench/timing.py: this script's folder is on sys.path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import franky

from robots.franka.config import FrankaConfig
from robots.franka.hardware.franky_arm import FrankyArm
from robots.franka.runtime import FrankaRuntime, build_runtime
from robots.franka.toolkit import FrankaToolkit

# Settled: joints 1-6 slower than this (joint 7's reported velocity chatters in the sim).
SETTLED_RAD_S = 0.01
# The highest speed factor the default safety envelope allows.
SPEED = 0.3


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def summary(name: str, values: list[float]) -> str:
    values = sorted(values)
    p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
    return f"{name:<40} median {ms(statistics.median(values))}   p90 {ms(p90)}   n={len(values)}"


def wait_moving(arm: FrankyArm, runtime: FrankaRuntime, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not arm.state().moving:
        if time.monotonic() > deadline:
            raise RuntimeError("the arm never started moving")
        time.sleep(0.002)
    # Let it reach cruising speed (0.25 s of simulated time) so every trial stops a moving arm alike.
    until = runtime.sim.time_s + 0.25
    while runtime.sim.time_s < until:
        time.sleep(0.002)


def wait_settled(arm: FrankyArm, runtime: FrankaRuntime, since: float, since_sim: float) -> tuple[float, float]:
    """(wall, simulated) seconds from `since` until joints 1-6 stay below SETTLED_RAD_S for 50 ms of sim time."""
    calm_from: tuple[float, float] | None = None
    deadline = time.perf_counter() + 60.0
    while time.perf_counter() < deadline:
        now, now_sim = time.perf_counter(), runtime.sim.time_s
        if max(abs(v) for v in arm.state().joint_velocities[:6]) < SETTLED_RAD_S:
            calm_from = calm_from or (now, now_sim)
            if now_sim - calm_from[1] >= 0.05:
                return calm_from[0] - since, calm_from[1] - since_sim
        else:
            calm_from = None
        time.sleep(0.002)
    raise RuntimeError("the arm did not settle")


def time_calls(fn: Callable[[], object], n: int) -> list[float]:
    fn()  # warm-up (first render creates GL buffers)
    return timed_calls(fn, n)


def bench_tools(kit: FrankaToolkit, runtime: FrankaRuntime, calls: int) -> None:
    print("== tool calls (in-process toolkit) ==")

    def call(name: str) -> None:
        result = kit.execute_tool(name, {})
        if result.is_error:
            raise RuntimeError(result.error)

    print(summary("get_state", time_calls(lambda: call("get_state"), calls)))
    print(summary(f"capture_images ({len(runtime.cameras)} cameras)", time_calls(lambda: call("capture_images"), calls)))
    print("== simulated cameras ==")
    for cam in runtime.cameras:
        times = time_calls(cam.capture, calls)
        print(f"{cam.name:<10} {cam.width}x{cam.height}   {1.0 / statistics.median(times):6.1f} frames/s (median {ms(statistics.median(times))})")


def bench_cancel(kit: FrankaToolkit, runtime: FrankaRuntime, trials: int) -> None:
    arm = runtime.arm()
    robot = arm._robot  # the bare franky Robot of the same arm, for the reference stop
    to_stop, to_return, bare_return = [], [], []
    tool_settle, bare_settle, tool_settle_sim, bare_settle_sim = [], [], [], []
    for i in range(trials):
        dy = 0.1 if i % 2 == 0 else -0.1
        # Through the toolkit: cancel a slow 10 cm move.
        call = kit.submit("move_by", {"dy_m": dy, "speed_factor": SPEED})
        wait_moving(arm, runtime)
        t_cancel, t_cancel_sim = time.perf_counter(), runtime.sim.time_s
        call.cancel()
        result = call.result(timeout=30)
        t_return = time.perf_counter()
        if not (result.error or "").startswith("cancelled"):
            raise RuntimeError(f"expected a cancelled call, got {result.to_dict()}")
        assert arm.last_stop_sent_s is not None
        to_stop.append(arm.last_stop_sent_s - t_cancel)
        to_return.append(t_return - t_cancel)
        wall, sim = wait_settled(arm, runtime, t_cancel, t_cancel_sim)
        tool_settle.append(wall)
        tool_settle_sim.append(sim)

        # Bare franky on the same arm: the same move, robot.stop(), join_motion raises.
        robot.move(
            franky.CartesianMotion(franky.Affine([0.0, -dy, 0.0]), franky.ReferenceType.Relative, SPEED),
            asynchronous=True,
        )
        wait_moving(arm, runtime)
        t_stop, t_stop_sim = time.perf_counter(), runtime.sim.time_s
        robot.stop()
        try:
            robot.join_motion(timeout=10)
        except franky.ControlException:
            pass  # "Move command preempted!": the expected consequence of stop()
        bare_return.append(time.perf_counter() - t_stop)
        wall, sim = wait_settled(arm, runtime, t_stop, t_stop_sim)
        bare_settle.append(wall)
        bare_settle_sim.append(sim)
        kit.execute_tool("home", {})
    print(f"== cancelling a long move ({trials} trials, wall clock) ==")
    print(summary("toolkit: cancel -> stop command sent", to_stop))
    print(summary("toolkit: cancel -> call returned", to_return))
    print(summary("toolkit: cancel -> arm settled (wall)", tool_settle))
    print(summary("toolkit: cancel -> arm settled (sim time)", tool_settle_sim))
    print(summary("bare franky: stop() -> join_motion raised", bare_return))
    print(summary("bare franky: stop() -> arm settled (wall)", bare_settle))
    print(summary("bare franky: stop() -> arm settled (sim)", bare_settle_sim))
    ratio = statistics.median(tool_settle_sim) / statistics.median(bare_settle_sim)
    print(f"settle ratio toolkit / bare franky (median, sim time): {ratio:.2f}")


BUSY_LOOP = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end: pass"


def bench_clock(kit: FrankaToolkit, runtime: FrankaRuntime, moves: int) -> None:
    """The same back-and-forth moves quiet and beside two busy loops, in lock-step and on the wall clock."""
    sim = runtime.sim
    print(f"== the simulator's clock under load ({moves} moves of 10 cm each) ==")
    print(f"{'clock':<11}{'busy loops':>11}{'sim s / wall s':>16}{'move (robot clock) median':>27}{'spread':>9}"
          f"{'planned again':>15}")
    quiet_ratio: dict[bool, float] = {}
    for lockstep in (True, False):
        for busy_loops in (0, 2):
            sim.lockstep = lockstep
            busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(busy_loops)]
            try:
                kit.execute_tool("home", {})
                replans = runtime.replans
                durations, wall, robot = [], 0.0, 0.0
                for i in range(moves):
                    w0, s0 = time.perf_counter(), sim.time_s
                    result = kit.execute_tool("move_by", {"dy_m": 0.1 if i % 2 == 0 else -0.1})
                    if result.error:
                        raise RuntimeError(result.error)
                    wall += time.perf_counter() - w0
                    robot += sim.time_s - s0
                    durations.append(sim.time_s - s0)
            finally:
                for process in busy:
                    process.kill()
                    process.wait()
            ratio = robot / wall
            quiet_ratio.setdefault(lockstep, ratio)
            spread = max(durations) - min(durations)
            print(f"{'lock-step' if lockstep else 'wall clock':<11}{busy_loops:>11}{ratio:>15.2f}x"
                  f"{statistics.median(durations):>25.3f} s{spread * 1000:>6.0f} ms{runtime.replans - replans:>15}")
    sim.lockstep = True
    print(f"lock-step / wall clock, sim s per wall s when quiet: {quiet_ratio[True] / quiet_ratio[False]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--clock-moves", type=int, default=6, help="moves per row of the clock table (0: skip it)")
    args = parser.parse_args()
    runtime = build_runtime(FrankaConfig(), sim=True)
    kit = FrankaToolkit(robot=runtime)
    try:
        wall0, sim0 = time.perf_counter(), runtime.sim.time_s
        bench_tools(kit, runtime, args.calls)
        bench_cancel(kit, runtime, args.trials)
        rate = (runtime.sim.time_s - sim0) / (time.perf_counter() - wall0)
        print(f"simulator speed during the run: {rate:.2f}x real time")
        if args.clock_moves:
            bench_clock(kit, runtime, args.clock_moves)
    finally:
        kit.close(timeout=30)
        runtime.close()


if __name__ == "__main__":
    main()
