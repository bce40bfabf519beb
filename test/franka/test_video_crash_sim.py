"""SIGKILL of `rpent run --robot franka --sim` mid-pick: the episode video still plays, and the record's
stream keeps all but its last second.

The franka films at its default 5 frames/s (every camera, tiled in one frame): a low rate, at which
an encoder that holds frames back loses the most. Each kill is a fresh run (the simulator lives in the runner's process and dies with it),
killed at a seeded random moment once the first motion (home) has ended. Frames are filmed while a
motion runs, from the start of home until the kill or the end of the last motion, and not while the
observation after a motion is taken: run.log marks when each observation began, steps.jsonl when the
next step started. Only filmed time counts as lost when the file lacks it.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from video_probe import ffprobe, probe

from rpent.record.steps import read_steps
from rpent.record.stream import read_stream

ROOT = Path(__file__).resolve().parents[2]
PICK = ROOT / "robots" / "franka" / "recipes" / "pick_cube.jsonl"
FPS = 5.0  # the franka's default --video-fps
# A crash loses at most the last second, plus the wait for the next 5 Hz frame and scheduling slack.
MAX_LOST_S = 1.0 + 1.0 / FPS + 0.5
# The stream's samples: at most a second, plus a sample's period and the same slack.
MAX_STREAM_LOST_S = 1.0 + 1.0 / 15 + 0.5
# A frame reaches the file when the next one is filmed: a kill this long after the first frame leaves a playable file.
PLAYABLE_AFTER_S = 0.5 + 1.0 / FPS
MOTIONS_S = 4.8  # from the end of home to the end of the last motion (move_by)


def wait_for_first_step(steps_path: Path, process: subprocess.Popen[str], timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (steps_path.exists() and read_steps(steps_path)):
        assert process.poll() is None, f"the run ended before its first step (exit {process.returncode})"
        assert time.monotonic() < deadline, "no step within the timeout: the simulator did not start?"
        time.sleep(0.05)


# The toolkit's run.log line as an observation begins (robots' motions film until then).
CAPTURE_LINE = re.compile(r"^(\S+ \S+)\.(\d{3}) DEBUG rpent\.tools\.toolkit: call \d+ \(\w+\): capturing the observation$")


def unfilmed_pauses(run_log: Path, steps: list[dict], killed_at: float) -> list[tuple[float, float]]:
    """From each observation's start to the next motion step's start (or the kill): no frames are filmed."""
    starts = sorted(s["started_at"] for s in steps if s["tool"] != "finish")
    pauses = []
    for line in run_log.read_text(errors="replace").splitlines():
        mark = CAPTURE_LINE.match(line)
        if mark:
            begin = time.mktime(time.strptime(mark[1], "%Y-%m-%d %H:%M:%S")) + int(mark[2]) / 1000
            end = next((t for t in starts if t > begin), killed_at)
            pauses.append((begin, min(end, killed_at)))
    return pauses


def filmed_s(begin: float, end: float, pauses: list[tuple[float, float]]) -> float:
    """Seconds of [begin, end] outside the (disjoint) pauses."""
    return max(0.0, end - begin) - sum(max(0.0, min(b, end) - max(a, begin)) for a, b in pauses)


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
        pauses = unfilmed_pauses(out / "run.log", steps, killed_at)
        first = steps[0]["started_at"]  # at or before the first frame: the video's clock starts there
        recorded_s = filmed_s(first, killed_at, pauses)
        seen = probe(out / "episode.mp4")
        # Frame times follow the wall clock, pauses included: what the file lacks is what came after its last frame.
        lost_s = filmed_s(first + (seen.last_s if seen.playable else 0.0), killed_at, pauses)
        # The record's stream (15 Hz, also paused while each observation is taken) loses as little.
        stream = read_stream(out)
        stream_lost_s = filmed_s(stream.samples[-1]["wall"], killed_at, pauses) if stream.samples else recorded_s
        line = (f"kill {index}: filmed {recorded_s:.2f} s ({len(pauses)} pauses, "
                f"{sum(b - a for a, b in pauses):.2f} s), {seen}, lost {lost_s:.2f} s; "
                f"stream: {len(stream.samples)} samples, lost {stream_lost_s:.2f} s")
        if stream_lost_s > MAX_STREAM_LOST_S:
            problems.append(line)
        report.append(line)
        playable += seen.playable
        if (recorded_s > PLAYABLE_AFTER_S and not seen.playable) or lost_s > MAX_LOST_S:
            problems.append(line)
        if seen.playable and seen.frames < seen.packets - 1:
            problems.append(f"damaged before the torn tail; {line}")
    summary = f"{kills} kills; episode: {playable}/{kills} playable"
    assert not problems, summary + "\n" + "\n".join(problems)
    print("\n" + summary + "\n" + "\n".join(report))
