"""SIGKILL of `rpent run --robot franka --sim` mid-pick: the episode video still plays.

The franka films at its default 3 frames/s, the rate at which an encoder that holds frames back loses
the most. Each kill is a fresh run (the simulator lives in the runner's process and dies with it),
killed at a seeded random moment once the first motion (home) has ended. Frames are filmed from the
start of home until the kill or the end of the last motion; steps.jsonl says when those were.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from video_probe import ffprobe, probe

from rpent.tools.steps import read_steps

ROOT = Path(__file__).resolve().parents[2]
PICK = ROOT / "robots" / "franka" / "recipes" / "pick_cube.jsonl"
FPS = 3.0  # the franka's default --video-fps
# A crash loses at most the last second, plus the wait for the next 3 Hz frame and scheduling slack.
MAX_LOST_S = 1.0 + 1.0 / FPS + 0.5
# A frame reaches the file when the next one is filmed: a kill this long after the first frame leaves a playable file.
PLAYABLE_AFTER_S = 0.5 + 1.0 / FPS
MOTIONS_S = 4.8  # from the end of home to the end of the last motion (move_by)


def wait_for_first_step(steps_path: Path, process: subprocess.Popen[str], timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (steps_path.exists() and read_steps(steps_path)):
        assert process.poll() is None, f"the run ended before its first step (exit {process.returncode})"
        assert time.monotonic() < deadline, "no step within the timeout: the simulator did not start?"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_sigkill_mid_pick_leaves_a_playable_episode_missing_at_most_a_second(tmp_path: Path) -> None:
    ffprobe()
    rng = random.Random(7)
    kills = 5
    report, problems, playable = [], [], 0
    for index in range(kills):
        out = tmp_path / f"kill-{index}"
        process = subprocess.Popen(
            [sys.executable, "-m", "rpent", "run", "--robot", "franka", "--sim", "--planner", "replay",
             "--recipe", str(PICK), "--output-dir", str(out), "--quiet", "--memory-dir", str(tmp_path / "memory")],
            cwd=ROOT, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            wait_for_first_step(out / "steps.jsonl", process)
            delay = MOTIONS_S * (index + rng.random()) / kills  # one moment in each fifth of the motions
            try:
                process.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGKILL)
            killed_at = time.time()
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(30)
        steps = read_steps(out / "steps.jsonl")
        filmed = [s for s in steps if s["tool"] != "finish"]
        all_ended = len(filmed) == len([line for line in PICK.read_text().splitlines() if '"finish"' not in line])
        last_frame_by = min(killed_at, filmed[-1]["ended_at"]) if all_ended else killed_at
        recorded_s = last_frame_by - steps[0]["started_at"]
        seen = probe(out / "episode.mp4")
        lost_s = recorded_s - (seen.last_s if seen.playable else 0.0)
        line = f"kill {index}: recorded {recorded_s:.2f} s, {seen}, lost {lost_s:.2f} s"
        report.append(line)
        playable += seen.playable
        if (recorded_s > PLAYABLE_AFTER_S and not seen.playable) or lost_s > MAX_LOST_S:
            problems.append(line)
        if seen.playable and seen.frames < seen.packets - 1:
            problems.append(f"damaged before the torn tail; {line}")
    summary = f"{kills} kills; episode: {playable}/{kills} playable"
    assert not problems, summary + "\n" + "\n".join(problems)
    print("\n" + summary + "\n" + "\n".join(report))
