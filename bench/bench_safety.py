"""What checking a Franka motion costs, next to what the motion itself takes.

Every motion is checked before franky sees it: target and path (sampled every 1 cm / 0.05 rad),
joints, workspace box, tilt cone, links above the table, keep-out zones, and for two arms the
distance between them. This prints the check's cost per motion kind (median and p90 over many runs,
from the arm's home pose), the same with four keep-out zones beside the paths (two boxes, two
posts) and its ratio to none, and, for the same motions run on franky-sim through the real franky
client, how long the motion took, so the check's share of a motion is a ratio measured in the same run.

    MUJOCO_GL=egl python bench/bench_safety.py [--runs 200] [--no-sim]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from robots.franka.arm_clearance import check_arm_clearance
from robots.franka.config import HOME_JOINTS_RAD
from robots.franka.keep_out import KeepOutZone
from robots.franka.safety import SafetyEnvelope
from robots.franka.safety_limits import ArmLimits
from rpent.runtime.types import Pose

HOME = np.asarray(HOME_JOINTS_RAD)
DOWN = (1.0, 0.0, 0.0, 0.0)


def _timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))]


#: Four zones a cell might have beside the benchmark's paths (none of them refuses one).
ZONES = [KeepOutZone.model_validate(z) for z in (
    {"name": "shelf", "box": {"x_m": [0.2, 0.6], "y_m": [0.75, 0.95], "z_m": [0.0, 0.9]}},
    {"name": "monitor", "box": {"x_m": [0.85, 0.95], "y_m": [-0.3, 0.3], "z_m": [0.2, 0.6]}},
    {"name": "tripod", "cylinder": {"center_xy_m": [1.4, 0.0], "radius_m": 0.08, "z_m": [0.0, 0.9]}},
    {"name": "post", "cylinder": {"center_xy_m": [0.75, -0.55], "radius_m": 0.03, "z_m": [0.0, 1.2]}},
)]


def checks(runs: int, keep_out: Sequence[KeepOutZone] = ()) -> dict[str, tuple[float, float]]:
    arm = SafetyEnvelope(ArmLimits(), "arm", keep_out=keep_out)
    left = SafetyEnvelope(ArmLimits(), "left", base_xyz_m=(0.0, 0.25, 0.0), keep_out=keep_out)
    right = SafetyEnvelope(ArmLimits(), "right", base_xyz_m=(0.0, -0.25, 0.0), keep_out=keep_out)
    home = arm.tcp_pose(HOME)
    by_10cm = Pose((home.position[0], home.position[1], home.position[2] - 0.10), home.quaternion)
    across = Pose((0.45, 0.2, 0.3), DOWN)
    joints = [0.3, 0.2, 0.0, -1.9, 0.0, 2.0, 0.785]

    def both() -> None:
        path = left.check_cartesian_motion(HOME, [by_10cm])
        check_arm_clearance([(left, path), (right, HOME[None])])

    return {
        "move_by 10 cm": _timed(lambda: arm.check_cartesian_motion(HOME, [by_10cm]), runs),
        "move_to 38 cm": _timed(lambda: arm.check_cartesian_motion(HOME, [across]), runs),
        "move_joints": _timed(lambda: arm.check_joint_motion(HOME, [joints]), runs),
        "home (from 0.15 rad away)": _timed(lambda: arm.check_joint_motion(HOME + 0.15, [HOME]), runs),
        "dual move_by 10 cm + clearance": _timed(both, runs),
    }


def motion_durations() -> dict[str, float]:
    """Wall time of the same motions on franky-sim (check included: it is part of start_*)."""
    from robots.franka.config import FrankaConfig
    from robots.franka.runtime import build_runtime

    runtime = build_runtime(FrankaConfig(), sim=True, sim_cameras=False)
    try:
        arm = runtime.arm()

        def run(start: Callable[[], None]) -> float:
            began = time.perf_counter()
            start()
            arm.wait(timeout_s=60)
            elapsed = (time.perf_counter() - began) * 1000
            arm.settled_state()
            return elapsed

        def from_home(start: Callable[[], None]) -> float:
            run(lambda: arm.start_joints([HOME_JOINTS_RAD]))
            return run(start)

        home = arm.settled_state().pose
        lower = Pose((home.position[0], home.position[1], home.position[2] - 0.10), home.quaternion)
        durations = {
            "move_by 10 cm": from_home(lambda: arm.start_cartesian([lower])),
            "move_to 38 cm": from_home(lambda: arm.start_cartesian([Pose((0.45, 0.2, 0.3), DOWN)])),
            "move_joints": from_home(lambda: arm.start_joints([[0.3, 0.2, 0.0, -1.9, 0.0, 2.0, 0.785]])),
        }
        run(lambda: arm.start_joints([list(HOME + 0.15)]))
        durations["home (from 0.15 rad away)"] = run(lambda: arm.start_joints([HOME_JOINTS_RAD]))
        durations["dual move_by 10 cm + clearance"] = durations["move_by 10 cm"]
        return durations
    finally:
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--no-sim", action="store_true", help="only the checks (no franky-sim motions)")
    args = parser.parse_args()
    costs = checks(args.runs)
    zoned = checks(args.runs, ZONES)
    durations = {} if args.no_sim else motion_durations()
    print(f"{'motion':34s} {'check median ms':>16s} {'p90 ms':>8s} {'4 zones ms':>11s} {'zones/none':>11s} "
          f"{'motion ms (sim)':>16s} {'check/motion':>13s}")
    for name, (median, p90) in costs.items():
        motion = durations.get(name, math.nan)
        with_zones = zoned[name][0]
        ratio = with_zones / motion if motion == motion else math.nan
        print(f"{name:34s} {median:16.2f} {p90:8.2f} {with_zones:11.2f} {with_zones / median:11.2f} "
              f"{motion:16.0f} {ratio:13.4f}")


if __name__ == "__main__":
    main()
