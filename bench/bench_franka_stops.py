"""How fast the Franka runtime gives up a motion: the figures test/franka/test_runtime_sim.py no longer times.

Prints, against franky-sim:
- gripper stop: cancel event set -> `gripper.move()` returned stopped (in-process simulator);
- lost robot: simulator process killed mid-motion -> `arm.wait()` raised RuntimeFault.

    MUJOCO_GL=egl python bench/bench_franka_stops.py [--trials 5] [--kills 3]

The simulator process binds 127.0.0.241/242; do not run this beside a test that uses them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# sim_process: the tests' way of starting franky-sim as a process of its own.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))

from sim_process import franka_sim_process

from robots.franka.config import FrankaConfig
from robots.franka.hardware.franky_arm import FrankyArm
from robots.franka.runtime import build_runtime
from rpent.runtime.arm import RuntimeFault


def line(name: str, values: list[float]) -> str:
    values = sorted(values)
    return (f"{name:<44} min {values[0] * 1000:8.1f} ms   median {statistics.median(values) * 1000:8.1f} ms   "
            f"max {values[-1] * 1000:8.1f} ms   n={len(values)}")


class _StampedEvent(threading.Event):
    """An Event that notes when it was set."""

    set_at = 0.0

    def set(self) -> None:
        self.set_at = time.monotonic()
        super().set()


def gripper_stop_s(trials: int) -> list[float]:
    runtime = build_runtime(FrankaConfig(), sim=True)
    try:
        gripper = runtime.gripper()
        figures = []
        for _ in range(trials):
            if not gripper.open(timeout_s=20).finished:
                raise RuntimeError("the gripper did not open")
            cancel = _StampedEvent()
            timer = threading.Timer(0.05, cancel.set)
            timer.start()
            outcome = gripper.move(0.0, timeout_s=20, cancel=cancel)
            returned = time.monotonic()
            timer.join()
            if not outcome.stopped:
                raise RuntimeError(f"the gripper move was not stopped: {outcome}")
            figures.append(returned - cancel.set_at)
        return figures
    finally:
        runtime.close()


def lost_robot_s(kills: int) -> list[float]:
    figures = []
    for _ in range(kills):
        with franka_sim_process("127.0.0.241", "127.0.0.242") as (proc, host):
            arm = FrankyArm(host, connect_timeout_s=10)
            arm.start_relative((0.0, 0.0, -0.08), speed_factor=0.1)
            proc.kill()
            killed = time.monotonic()
            try:
                arm.wait(timeout_s=30)
            except RuntimeFault:
                figures.append(time.monotonic() - killed)
            else:
                raise RuntimeError("arm.wait() returned although the simulator was killed")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5, help="gripper stops")
    parser.add_argument("--kills", type=int, default=3, help="simulator kills (each starts a simulator process)")
    args = parser.parse_args()
    print(line("gripper: cancel -> move() returned", gripper_stop_s(args.trials)))
    print(line("arm: simulator killed -> RuntimeFault raised", lost_robot_s(args.kills)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
