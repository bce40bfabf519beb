"""The record's stream (robots.franka.recording): what recording costs, and how fast `rpent export lerobot` is.

On franky-sim in this process, alternating rounds without the stream and with it at 15 Hz (the same arm, the
same scene, the same run of the machine), first with no cameras (the stream's own cost, as beside a real arm
whose cameras are devices of their own), then with the simulator's three cameras, which Mesa renders in
software on this machine's CPU:
  - run_policy (a scripted openpi DROID server on 127.0.0.1, 24 steps): the control period's p99 deviation
    from 66.7 ms on the robot's clock and on this machine's, and the step check's p99;
  - a move_to there and back: the tool call's duration.
Each figure is printed for both and as the difference or ratio (with / without). Then the streams the
rounds recorded are exported (rpent and droid conventions) and the export's speed is printed in frames per
second and as a multiple of real time (the stream's 15 frames a second).

    MUJOCO_GL=egl python bench/bench_recording.py [--rounds 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))  # the tests' scripted openpi server

from fakes.droid_policies import Reversing
from fakes.openpi_server import ScriptedPolicyServer

from robots.franka.config import FrankaConfig
from robots.franka.recording import FrankaRecording, camera_roles
from robots.franka.runtime import build_runtime
from robots.franka.toolkit import FrankaToolkit
from rpent.dataset.command import export_lerobot

OUT = {"x_m": 0.45, "y_m": 0.1, "z_m": 0.35, "speed_factor": 0.3}
BACK = {"x_m": 0.5, "y_m": 0.0, "z_m": 0.45, "speed_factor": 0.3}


def one_round(runtime, out: Path, hz: float, cameras: bool) -> dict[str, float]:
    kit = FrankaToolkit(robot=runtime, output_dir=out, task="bench")
    if hz:
        chosen = runtime.cameras if cameras else []
        kit.recording = FrankaRecording(runtime, out, 1, hz=hz, acting=kit.acting_calls, cameras=chosen, header={
            "robot": "franka", "task": "bench", "cameras": camera_roles(runtime, "front") if cameras else []})
    try:
        assert kit.execute_tool("home", {"speed_factor": 0.3}).error is None
        policy = kit.execute_tool("run_policy", {"instruction": "turn the hand", "max_steps": 24})
        assert policy.error is None, policy.error
        control = policy.data["action_result"]["control"]
        moves = []
        for target in (OUT, BACK):
            started = time.perf_counter()
            result = kit.execute_tool("move_to", target)
            moves.append(time.perf_counter() - started)
            assert result.error is None, result.error
    finally:
        kit.close(timeout=60)
    return {"period_p99_ms": control["p99_deviation_ms"], "wall_rate": control["clock_rate"],
            "check_p99_ms": control["p99_check_ms"], "move_s": statistics.mean(moves)}


def compare(server: ScriptedPolicyServer, tmp: Path, rounds: int, cameras: bool) -> list[str]:
    """Alternating rounds without the stream and with it; the rows of the table, and the runs recorded."""
    figures: dict[float, list[dict[str, float]]] = {0.0: [], 15.0: []}
    runtime = build_runtime(FrankaConfig(vla_endpoint=server.endpoint), sim=True)
    name = "cameras" if cameras else "no-cameras"
    try:
        one_round(runtime, tmp / f"warm-up-{name}", 0.0, cameras)
        for index in range(rounds):
            for hz in (0.0, 15.0) if index % 2 == 0 else (15.0, 0.0):
                figures[hz].append(one_round(runtime, tmp / f"{name}-{index}-{hz:g}", hz, cameras))
    finally:
        runtime.close()
    rows = []
    for key, label, unit in (("period_p99_ms", "control period p99 deviation, robot clock", "ms"),
                             ("check_p99_ms", "step check p99", "ms"),
                             ("move_s", "move_to duration (mean)", "s")):
        without = statistics.median(r[key] for r in figures[0.0])
        with_ = statistics.median(r[key] for r in figures[15.0])
        change = f"{with_ - without:+.2f} {unit}" if unit == "ms" else f"x{with_ / without:.3f}"
        rows.append(f"{label:<44}{without:>9.2f} {unit:<2}{with_:>9.2f} {unit:<2}{change:>12}")
    rates = [statistics.median(r["wall_rate"] for r in figures[hz]) for hz in (0.0, 15.0)]
    rows.append(f"{'robot clock / wall clock during the policy':<44}{rates[0]:>12.3f}{rates[1]:>12.3f}"
                f"{'x' + format(rates[1] / rates[0], '.3f'):>12}")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="rounds of each (alternating)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rpent-bench-recording-") as tmp, \
            ScriptedPolicyServer(Reversing(joint=6, units=0.4)) as server:
        for cameras, title in ((False, "the stream alone (no cameras: a real arm's cameras are devices of their own)"),
                               (True, "with franky-sim's three cameras, rendered in software (Mesa) on this machine")):
            print(f"\n{title}\n{'':<44}{'no stream':>12}{'15 Hz':>12}{'change':>12}")
            print("\n".join(compare(server, Path(tmp), args.rounds, cameras)))
        runs = [str(p) for p in sorted(Path(tmp).glob("cameras-*-15"))]
        print()
        for convention in ("rpent", "droid"):
            started = time.perf_counter()
            summary = export_lerobot(runs, Path(tmp) / f"dataset-{convention}", convention=convention)
            seconds = time.perf_counter() - started
            fps = summary["frames"] / seconds
            print(f"export ({convention}, 3 cameras): {summary['episodes']} episodes, {summary['frames']} frames in "
                  f"{seconds:.2f} s: {fps:.0f} frames/s, {fps / 15:.1f}x real time")


if __name__ == "__main__":
    main()
