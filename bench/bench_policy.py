"""What run_policy's loop costs and how well the arm follows it, on franky-sim with a scripted openpi server.

Prints, in process:
- per-step check (envelope target and path, velocity, acceleration) in ms, against the 1 ms aim;
- observation build (two camera renders, resize with padding, joints, gripper) in ms;
- inference round trip against the same scripted server: our client (rpent.rpc.transport.vla_openpi) vs bare
  openpi-client's WebsocketClientPolicy, and their ratio (aim <= 1.1);
- control period deviation from 66.7 ms within chunks (p50, p99; aim p99 <= 5 ms) of one long run;
- tracking: joint velocity motions vs replaced asynchronous joint motions (--tracking), the mean and
  largest gap between each step's target and the measured joints one period later.

    MUJOCO_GL=egl python bench/bench_policy.py [--steps 240] [--trials 200]

runtime_mode:=ros figures come from test/ros/test_policy_launch_rclpy.py (it prints the run's control summary).
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the tests' scripted openpi server

from fakes.droid_policies import droid_chunk
from fakes.openpi_server import ScriptedPolicyServer

from robots.franka import droid
from robots.franka.config import FrankaConfig
from robots.franka.runtime import build_runtime
from robots.franka.step_check import check_step


def ms(values: list[float]) -> str:
    values = sorted(v * 1000 for v in values)
    return f"median {statistics.median(values):7.3f} ms   p99 {values[int(0.99 * (len(values) - 1))]:7.3f} ms"


def sine(k: int) -> list[float]:
    return [0.1 * np.sin(k / 8 * np.pi), 0.0, 0.0, 0.05 * np.cos(k / 16 * np.pi), 0.0, 0.0, 0.0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=240)
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    with ScriptedPolicyServer(lambda obs, i: droid_chunk([0.0] * 7)) as server:
        runtime = build_runtime(FrankaConfig(vla_endpoint=server.endpoint), sim=True)
        try:
            arm, policy = runtime.arm(), runtime.policy()
            state = arm.state()
            q, dq = np.asarray(state.joints), np.asarray(state.joint_velocities)
            checks = []
            for _ in range(args.trials):
                start = time.perf_counter()
                check_step(arm.envelope, q, dq, q + 0.02, 1 / 15, 0, (), arm.stopping_rad_s2)
                checks.append(time.perf_counter() - start)
            print(f"{'per-step check':<40} {ms(checks)}   (aim <= 1 ms)")
            observe = []
            for _ in range(max(5, args.trials // 20)):
                start = time.perf_counter()
                exterior = droid.policy_image(policy.exterior_camera.capture())
                wrist = droid.policy_image(policy.wrist_camera.capture())
                obs = droid.observation(exterior, wrist, arm.state().joints, 0.0, "bench")
                observe.append(time.perf_counter() - start)
            print(f"{'observation build (2 renders)':<40} {ms(observe)}")
            from openpi_client.websocket_client_policy import WebsocketClientPolicy

            ours, bare = policy.client, WebsocketClientPolicy(host=server.endpoint)
            ours.connect()
            times: dict[str, list[float]] = {"ours": [], "bare": []}
            for _ in range(args.trials):  # interleaved, so both see the same load
                for name, client in (("ours", ours), ("bare", bare)):
                    start = time.perf_counter()
                    client.infer(obs)
                    times[name].append(time.perf_counter() - start)
            ratio = statistics.median(times["ours"]) / statistics.median(times["bare"])
            print(f"{'inference round trip, our client':<40} {ms(times['ours'])}")
            print(f"{'inference round trip, bare openpi-client':<40} {ms(times['bare'])}   ratio {ratio:.3f} (aim <= 1.1)")
            for motion in ("velocity", "position"):
                periods, tracking = [], []
                done = 0
                while done < args.steps:
                    actions = [sine(done + k) for k in range(8)]
                    report = arm.run_joint_steps(actions, motion=motion, first_step=done)
                    assert report["stopped"] is None, report
                    done += report["steps"]
                    stamps = report["step_times_s"]
                    periods += [abs(b - a - 1 / 15) for a, b in itertools.pairwise(stamps)]
                    tracking += report["tracking_error_rad"]
                    arm.wait(timeout_s=5)
                print(f"{'control period deviation, ' + motion:<40} {ms(periods)}   (aim p99 <= 5 ms)")
                print(f"{'tracking error, ' + motion + ' motions':<40} mean {np.mean(tracking):.4f} rad   "
                      f"max {np.max(tracking):.4f} rad")
                arm.start_joints([runtime.arm_configs["arm"].home_joints_rad], 0.3)
                arm.wait(timeout_s=30)
        finally:
            runtime.close()


if __name__ == "__main__":
    main()
