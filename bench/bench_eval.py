"""`rpent eval` throughput: episodes per minute at 1 and 2 concurrent episodes, and what Ray adds per episode.

    python bench/bench_eval.py [--episodes 4] [--suite libero_object] [--task-id 0] [--franka-seeds 4]

One Ray head is started for the whole benchmark (`ray start --head --node-ip-address=127.0.0.1`,
its own temp dir, stopped at the end), so the figures are those of a sweep sent to a running
cluster. Part 1 runs the same LIBERO replay sweep (task `--task-id`, init states 0..episodes-1)
with concurrency 1 and then 2, each into a fresh folder, and reports episodes per minute and the
ratio. Part 2 runs one episode as `rpent run` (a subprocess, as an operator would) and the same
episode as a one-episode sweep, in `--pairs` interleaved pairs, and reports the difference of
their wall times (the per-episode overhead of the sweep: Ray connect, a fresh worker, the checks
and the summary) and each one's time outside the task itself (result.json `wall_time_s`). Part 3
runs a seed sweep of the simulated Franka's vision pick (`--robot franka --sim --sim-seed N` with
test/franka/scripted_pick.py's planner, which sees only tool outputs) with 1 and with 2 workers,
interleaved over `--franka-rounds`, each episode's franky-sim on a block of `--sim-hosts` of its own,
and reports the speed-up of the median walls.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "test" / "eval"))  # running_head: the tests' way to start and stop a head

from rpent.eval.cluster import prepare_environment  # noqa: E402

prepare_environment(loopback=True)

from eval_helpers import free_port, running_head  # noqa: E402

from rpent.eval.progress import Progress  # noqa: E402
from rpent.eval.schedule import run_sweep  # noqa: E402
from rpent.eval.sweep import parse_sweep  # noqa: E402

RECIPE = str(REPO / "robots/libero/recipes/{suite}_task{task}_pick_place.jsonl")
# The vision pick is a planner plugin of the tests; workers import it by name, from PYTHONPATH.
VISION_PICK = "scripted_pick:RedCubePickPlanner"
PLUGINS = REPO / "test" / "franka"


class Quiet(Progress):
    def show(self) -> None:
        pass


@contextmanager
def ray_head(temp_dir: Path) -> Iterator[str]:
    """A Ray head of the benchmark's own (token authentication, its temp dir), stopped after; its address."""
    port = free_port()
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    argv = [str(Path(sys.executable).with_name("ray")), "start", "--head", "--node-ip-address=127.0.0.1",
            f"--port={port}", "--num-cpus=2", "--include-dashboard=false", f"--temp-dir={temp_dir}",
            "--disable-usage-stats", "--block"]
    with running_head(argv, env=dict(os.environ), cwd=None, temp_dir=temp_dir, start_timeout_s=180):
        yield f"127.0.0.1:{port}"


def sweep_of(suite: str, task_id: int, init_states: list[int], concurrency: int):
    return parse_sweep({"robot": "libero", "suites": [suite], "tasks": [task_id], "init_states": init_states,
                        "recipe": RECIPE, "concurrency": concurrency, "memory_per_episode_mb": 2048})


def franka_sweep(seeds: list[int], concurrency: int, sim_hosts: str, video_fps: float | None):
    robot_args = [] if video_fps is None else ["--video-fps", str(video_fps)]
    return parse_sweep({"robot": "franka", "seeds": seeds, "planner": VISION_PICK, "max_turns": 30, "robot_args": robot_args,
                        "concurrency": concurrency, "sim_hosts": sim_hosts, "memory_per_episode_mb": 2048})


def franka_speedup(seeds: int, rounds: int, sim_hosts: str, root: Path, address: str, video_fps: float | None) -> None:
    """Sweeps with 1 and 2 workers, interleaved (1, 2, then 2, 1, ...) so that a machine whose load
    drifts weighs on both alike; the speed-up is the ratio of the median walls."""
    walls: dict[int, list[float]] = {1: [], 2: []}
    for index in range(rounds):
        for workers in (1, 2) if index % 2 == 0 else (2, 1):
            out = root / f"franka-v{video_fps}-r{index}-w{workers}"
            wall = timed_sweep(franka_sweep(list(range(1, seeds + 1)), workers, sim_hosts, video_fps), out, address)
            walls[workers].append(wall)
            solved = sum(json.loads((p / "result.json").read_text())["solved"] is True for p in out.glob("franka-seed*"))
            print(f"franka vision pick, {seeds} seeds, {workers} worker(s): {wall:.0f} s "
                  f"({seeds / wall * 60:.2f} episodes/min, {solved}/{seeds} solved; load {os.getloadavg()[0]:.1f})",
                  flush=True)
    one, two = statistics.median(walls[1]), statistics.median(walls[2])
    video = "the robot's default video" if video_fps is None else f"--video-fps {video_fps:g}"
    print(f"speed-up 2 workers / 1 worker ({video}, median of {rounds}): {one / two:.2f}x ({one:.0f} s vs {two:.0f} s)")


def timed_sweep(sweep, out: Path, address: str) -> float:
    started = time.perf_counter()
    outcome = run_sweep(sweep, out, ray_address=address, progress=Quiet(len(sweep.episodes())))
    if outcome.failed:
        raise SystemExit(f"episodes failed: {outcome.failed}")
    return time.perf_counter() - started


def timed_run(suite: str, task_id: int, out: Path) -> float:
    recipe = RECIPE.format(suite=suite, task=task_id)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rpent", "run", "--robot", "libero", "--suite", suite, "--task-id",
                    str(task_id), "--init-state", "0", "--planner", "replay", "--recipe", recipe, "--quiet",
                    "--output-dir", str(out), "--memory-dir", str(out.parent / f"{out.name}-memory")],
                   cwd=REPO, check=True, timeout=900)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=4, help="episodes per sweep (default 4)")
    parser.add_argument("--suite", default="libero_object")
    parser.add_argument("--task-id", type=int, default=0)
    parser.add_argument("--pairs", type=int, default=3, help="interleaved run/sweep pairs for the overhead (default 3)")
    parser.add_argument("--skip-throughput", action="store_true", help="the overhead figures only")
    parser.add_argument("--skip-libero", action="store_true", help="parts 1 and 2 (LIBERO) not at all")
    parser.add_argument("--franka-seeds", type=int, default=4, help="seeds of the Franka sweep (default 4; 0: none)")
    parser.add_argument("--franka-rounds", type=int, default=2, help="interleaved 1- and 2-worker sweeps (default 2)")
    parser.add_argument("--franka-video-fps", type=float, help="--video-fps of its episodes (default: the robot's)")
    parser.add_argument("--sim-hosts", default="127.0.0.140-169", help="franky-sim addresses of the Franka sweep")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="be-", dir="/tmp"))
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2-core machine shared with other jobs); folders in {root}")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PLUGINS), str(REPO), os.environ.get("PYTHONPATH")]))
    sys.path.insert(0, str(PLUGINS))  # the driver checks the planner before the sweep starts
    with ray_head(root) as address:
        if args.franka_seeds:
            franka_speedup(args.franka_seeds, args.franka_rounds, args.sim_hosts, root, address, args.franka_video_fps)
        if args.skip_libero:
            return
        init_states = list(range(args.episodes))
        rates = {}
        for concurrency in () if args.skip_throughput else (1, 2):
            wall = timed_sweep(sweep_of(args.suite, args.task_id, init_states, concurrency), root / f"c{concurrency}",
                               address)
            rates[concurrency] = args.episodes / wall * 60
            print(f"concurrency {concurrency}: {args.episodes} episodes in {wall:.0f} s = "
                  f"{rates[concurrency]:.2f} episodes/min", flush=True)
        if rates:
            print(f"ratio 2 / 1 concurrent: {rates[2] / rates[1]:.2f}")
        runs, sweeps, run_inner, sweep_inner = [], [], [], []
        for i in range(args.pairs):
            runs.append(timed_run(args.suite, args.task_id, root / f"run{i}"))
            run_inner.append(json.loads((root / f"run{i}" / "result.json").read_text())["wall_time_s"])
            sweeps.append(timed_sweep(sweep_of(args.suite, args.task_id, [0], 1), root / f"one{i}", address))
            sweep_inner.append(json.loads((root / f"one{i}" / f"{args.suite}-task{args.task_id:02d}-init00-rep0"
                                           / "result.json").read_text())["wall_time_s"])
        med = statistics.median
        print(f"one episode, median of {args.pairs} interleaved pairs: `rpent run` {med(runs):.1f} s "
              f"(task {med(run_inner):.1f} s), as a one-episode sweep on Ray {med(sweeps):.1f} s (task {med(sweep_inner):.1f} s)")
        print(f"per-episode overhead of the sweep over `rpent run`: {med(sweeps) - med(runs):+.1f} s wall; "
              f"outside the task: {med(s - t for s, t in zip(sweeps, sweep_inner, strict=True)):.1f} s (sweep) vs "
              f"{med(r - t for r, t in zip(runs, run_inner, strict=True)):.1f} s (run)")


if __name__ == "__main__":
    main()
