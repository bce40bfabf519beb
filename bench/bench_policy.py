"""What run_policy's loop costs and how well the arm follows it, on franky-sim with a scripted openpi server.

Prints, in process (`--runtime-mode inprocess`, the default):
- per-step shaping and check (velocity limits, envelope target and the path to rest) in ms, against the 1 ms aim;
- observation build (two camera renders, resize with padding, joints, gripper) in ms;
- inference round trip against the same scripted server: our client (rpent.rpc.transport.vla_openpi) vs bare
  openpi-client's WebsocketClientPolicy, and their ratio (aim <= 1.1);
- control period deviation from 66.7 ms within chunks (p50, p99; aim p99 <= 5 ms), on the robot's clock
  (franky's state time, which the steps keep) and on this machine's, and the ratio of the two clocks;
- tracking: joint velocity motions vs replaced asynchronous joint motions, the mean and largest gap between
  each step's target and the measured joints one period later;
- a checkpoint-sized policy (0.4 units, 1.2 rad/s, on joints 1 and 4, reversing each chunk): the share of
  its steps shaped down to the velocity cap, and the smallest scale.

With `--runtime-mode ros` (ROS 2 sourced, the rpent package built): the same figures of one run_policy call
through `ros2 launch rpent dual_franka.launch.py use_sim:=true vla_endpoint:=...` and the stock
`ros2 action send_goal /toolkit/tools/run_policy`, from the run's own result (its control summary and
inference log: the loop runs in the arm node, the observation and the inference in the vla_client_node),
beside bare openpi-client's round trip from this process against the same server with the observations
the node sent.

    MUJOCO_GL=egl python bench/bench_policy.py [--steps 240] [--trials 200] [--runtime-mode ros]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the tests' scripted openpi server

from fakes.droid_policies import droid_chunk
from fakes.openpi_server import ScriptedPolicyServer
from sim_process import free_sim_hosts

from robots.franka.config import FrankaConfig
from robots.franka.policy import droid, stream
from robots.franka.policy.step_safety import check_step, shape_step
from robots.franka.runtime import build_runtime

PERIOD_S = 1 / 15


def ms(values: list[float]) -> str:
    values = sorted(v * 1000 for v in values)
    return f"median {statistics.median(values):7.3f} ms   p99 {values[int(0.99 * (len(values) - 1))]:7.3f} ms"


def sine(k: int) -> list[float]:
    return [0.1 * np.sin(k / 8 * np.pi), 0.0, 0.0, 0.05 * np.cos(k / 16 * np.pi), 0.0, 0.0, 0.0]


def round_trips(server: ScriptedPolicyServer, client, obs: dict, trials: int, bare=None) -> dict[str, list[float]]:
    """Round trips of `obs` through `client` and, interleaved so both see the same load, bare openpi-client."""
    from openpi_client.websocket_client_policy import WebsocketClientPolicy

    bare = bare or WebsocketClientPolicy(host=server.endpoint)
    times: dict[str, list[float]] = {"ours": [], "bare": []}
    for _ in range(trials):
        for name, c in (("ours", client), ("bare", bare)):
            if c is None:
                continue
            start = time.perf_counter()
            c.infer(obs)
            times[name].append(time.perf_counter() - start)
    return times


def in_process(args: argparse.Namespace) -> None:
    with ScriptedPolicyServer(lambda obs, i: droid_chunk([0.0] * 7)) as server:
        runtime = build_runtime(FrankaConfig(vla_endpoint=server.endpoint), sim=True,
                                sim_hosts=free_sim_hosts(200, 224))
        try:
            arm, policy = runtime.arm(), runtime.policy()
            state = arm.state()
            q, dq = np.asarray(state.joints), np.asarray(state.joint_velocities)
            checks = []
            for _ in range(args.trials):
                start = time.perf_counter()
                step = shape_step(arm.envelope, q, q + 0.02, PERIOD_S)
                check_step(arm.envelope, q, dq, step, PERIOD_S, 0, (), arm.step_brake)
                checks.append(time.perf_counter() - start)
            print(f"{'per-step shaping and check':<40} {ms(checks)}   (aim <= 1 ms)")
            observe = []
            for _ in range(max(5, args.trials // 20)):
                start = time.perf_counter()
                exterior = droid.policy_image(policy.exterior_camera.capture())
                wrist = droid.policy_image(policy.wrist_camera.capture())
                obs = droid.observation(exterior, wrist, arm.state().joints, 0.0, "bench")
                observe.append(time.perf_counter() - start)
            print(f"{'observation build (2 renders)':<40} {ms(observe)}")
            policy.client.connect()
            times = round_trips(server, policy.client, obs, args.trials)
            ratio = statistics.median(times["ours"]) / statistics.median(times["bare"])
            print(f"{'inference round trip, our client':<40} {ms(times['ours'])}")
            print(f"{'inference round trip, bare openpi-client':<40} {ms(times['bare'])}   ratio {ratio:.3f} (aim <= 1.1)")
            for motion in ("velocity", "position"):
                robot, wall, tracking = [], [], []
                done = 0
                while done < args.steps:
                    actions = [sine(done + k) for k in range(8)]
                    report = stream.run(arm, actions, motion=motion, first_step=done)
                    assert report["stopped"] is None, report
                    done += report["steps"]
                    robot += [abs(b - a - PERIOD_S) for a, b in itertools.pairwise(report["step_clock_s"])]
                    wall += [abs(b - a - PERIOD_S) for a, b in itertools.pairwise(report["step_times_s"])]
                    tracking += report["tracking_error_rad"]
                    arm.wait(timeout_s=5)
                print(f"{'control period deviation, ' + motion:<40} {ms(robot)}   (robot clock; aim p99 <= 5 ms)")
                print(f"{'  the same on this machine`s clock':<40} {ms(wall)}")
                print(f"{'tracking error, ' + motion + ' motions':<40} mean {np.mean(tracking):.4f} rad   "
                      f"max {np.max(tracking):.4f} rad")
                arm.start_joints([runtime.arm_configs["arm"].home_joints_rad], 0.3)
                arm.wait(timeout_s=30)
            scales: list[float] = []
            for chunk in range(6):
                sign = 1.0 if chunk % 2 == 0 else -1.0
                report = stream.run(arm, [[0.4 * sign, 0.0, 0.0, -0.4 * sign, 0.0, 0.0, 0.0]] * 8, first_step=8 * chunk)
                assert report["stopped"] is None, report
                scales += report["scale"]
                arm.wait(timeout_s=5)
            scaled = [v for v in scales if v < 1.0]
            print(f"{'checkpoint-sized policy (0.4 units)':<40} {len(scaled)} of {len(scales)} steps shaped "
                  f"({100 * len(scaled) / len(scales):.0f}%), smallest scale {min(scales):.3f}")
            arm.start_joints([runtime.arm_configs["arm"].home_joints_rad], 0.3)
            arm.wait(timeout_s=30)
        finally:
            runtime.close()


def send_goal(tool: str, arguments: dict, timeout_s: float) -> dict:
    """The stock `ros2 action send_goal /toolkit/tools/<tool>`; the tool's action_result."""
    goal = f"{{arguments_json: '{json.dumps(arguments)}'}}"
    out = subprocess.run(["ros2", "action", "send_goal", f"/toolkit/tools/{tool}", "rpent/action/CallTool", goal],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout_s).stdout
    if "Goal finished with status: SUCCEEDED" not in out:
        raise SystemExit(f"{tool} did not succeed:\n{out[-3000:]}")
    marker = "result_json: '"
    start = out.rindex(marker) + len(marker)
    return json.loads(out[start:out.index("'\n", start)].replace("''", "'"))["action_result"]


def under_ros(args: argparse.Namespace) -> None:
    from ros.launch_process import Launch, environment

    with ScriptedPolicyServer(lambda obs, i: droid_chunk(sine(8 * i))) as server, \
            tempfile.TemporaryDirectory(prefix="bench_policy_") as tmp:
        launch = Launch("dual_franka.launch.py", "use_sim:=true", f"sim_hosts:={','.join(free_sim_hosts(200, 224, 2))}",
                        f"vla_endpoint:={server.endpoint}", f"output_dir:={tmp}/run", log=Path(tmp) / "launch.log",
                        env=environment())
        try:
            result = send_goal("run_policy", {"arm": "right", "instruction": "bench", "max_steps": args.steps,
                                              "max_duration_s": 600}, timeout_s=900)
            # Bare openpi-client from here on the observations the node sent, while the launch still runs.
            bare = round_trips(server, None, server.observations[-1], args.trials)["bare"]
        finally:
            launch.stop()
        control, log = result["control"], result["inference_log"]
        print(f"runtime_mode ros: {result['steps']} steps, {result['inferences']} inferences, stopped {result['stopped']}")
        print(f"{'per-step check (arm node)':<40} median {control['p50_check_ms']:7.3f} ms   "
              f"p99 {control['p99_check_ms']:7.3f} ms   (aim <= 1 ms)")
        print(f"{'observation build (vla_client_node)':<40} {ms([i['observation_ms'] / 1000 for i in log])}   "
              "(2 renders in franka_sim_node, 3 node calls)")
        print(f"{'control period deviation (arm node)':<40} p50 {control['p50_deviation_ms']:7.3f} ms   "
              f"p99 {control['p99_deviation_ms']:7.3f} ms   (robot clock; aim p99 <= 5 ms; "
              f"robot clock / this machine's {control['clock_rate']})")
        print(f"{'tracking error':<40} mean {control['mean_tracking_error_rad']:.4f} rad   "
              f"max {control['max_tracking_error_rad']:.4f} rad")
        print(f"{'steps shaped to a velocity limit':<40} {control.get('scaled_steps', 0)} of {result['steps']}, "
              f"smallest scale {control.get('smallest_scale')}")
        ours = [i["latency_ms"] / 1000 for i in log]
        ratio = statistics.median(ours) / statistics.median(bare)
        print(f"{'inference round trip, vla_client_node':<40} {ms(ours)}")
        print(f"{'inference round trip, bare openpi-client':<40} {ms(bare)}   ratio {ratio:.3f} (aim <= 1.1)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=240)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--runtime-mode", choices=("inprocess", "ros"), default="inprocess")
    args = parser.parse_args()
    (under_ros if args.runtime_mode == "ros" else in_process)(args)


if __name__ == "__main__":
    main()
