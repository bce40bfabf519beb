"""SIGKILL at random moments of real toy runs: the episode video and the per-action clips stay playable.

Each kill is a fresh `python -m rpent run` into a fresh directory, killed at a seeded random moment
spread over the run. What was recorded comes from steps.jsonl (fsynced per call, written before the
next call starts): frames start with the first move (right after get_state ended) and run at 50 Hz
until the kill or the end of the last move. Every video is then probed with the real ffprobe.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from video_probe import Probe, ffprobe, probe

from rpent.record.steps import read_steps

ROOT = Path(__file__).resolve().parents[2]
# The README's promise: a crash loses at most the last second; the slack absorbs scheduling on a busy machine.
MAX_LOST_S = 1.0 + 0.5
# Frames reach the file one behind the encoder: a kill this long after the first frame leaves a playable file.
PLAYABLE_AFTER_S = 0.5
SPEED = "0.3"  # m/s: the three moves below take about 1.2 s, 1.7 s and 1.7 s
MOVES = [(0.05, 0.05, 0.2), (0.55, 0.05, 0.2), (0.55, 0.55, 0.2)]
RUN_S = 5.0  # launch to the end of the last move, with a little start-up


@dataclass
class Span:
    """What one video should hold: frames from `start` (wall clock) to `end`, and what the file holds."""

    name: str
    start: float
    end: float
    seen: Probe

    @property
    def recorded_s(self) -> float:
        return max(0.0, self.end - self.start)

    @property
    def lost_s(self) -> float:
        return self.recorded_s - (self.seen.last_s if self.seen.playable else 0.0)


def write_recipe(tmp_path: Path) -> Path:
    recipe = tmp_path / "recipe.jsonl"
    lines = [{"tool": "get_state", "arguments": {}}]
    lines += [{"tool": "move_to", "arguments": {"x_m": x, "y_m": y, "z_m": z}} for x, y, z in MOVES]
    recipe.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return recipe


def spread(rng: random.Random, span_s: float, count: int) -> list[float]:
    """`count` random moments in [0, span_s), one in each equal slice, so they cover the whole run."""
    return [span_s * (i + rng.random()) / count for i in range(count)]


def runner(recipe: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rpent", "run", "--robot", "toy", "--planner", "replay", "--recipe", str(recipe),
            "--speed", SPEED, "--output-dir", str(out), "--quiet", *extra]


def kill_after(process: subprocess.Popen[str], delay_s: float) -> float:
    """SIGKILL `process` `delay_s` from now unless it ends first; returns the wall-clock end of recording."""
    try:
        process.wait(timeout=delay_s)  # a run that ends by itself closed its files normally
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGKILL)
    killed_at = time.time()
    process.wait(timeout=30)
    return killed_at


def two_at_a_time(kill: Callable[[int, float], list[Span]], moments: list[float]) -> list[Span]:
    """`kill(index, delay)` for every moment, two runs at once (the toy's runs mostly wait on its motions,
    so two at a time halve the test's time), the spans in the moments' order."""
    with ThreadPoolExecutor(2) as pool:
        found = list(pool.map(kill, range(len(moments)), moments))
    return [span for spans_of_one in found for span in spans_of_one]


def spans(record: Path, killed_at: float) -> list[Span]:
    """The episode's and each started move's expected span, from the calls that reached steps.jsonl."""
    steps = read_steps(record / "steps.jsonl") if (record / "steps.jsonl").exists() else []
    if not steps:
        return []  # killed before get_state ended: no move started, no frame was recorded
    moves = [s for s in steps if s["tool"] == "move_to"]
    # A move starts when the call before it ended; the last started move may not have ended.
    starts = [steps[0]["ended_at"], *(m["ended_at"] for m in moves)][: len(MOVES)]
    ends = [min(m["ended_at"], killed_at) for m in moves] + [killed_at] * (len(starts) - len(moves))
    result = [Span("episode", starts[0], ends[-1], probe(episode_file(record)))]
    for index, (start, end) in enumerate(zip(starts, ends, strict=True)):
        result.append(Span(f"clip of call {index + 2}", start, end, probe(clip_file(record, index + 2))))
    return result


def episode_file(record: Path) -> Path:
    return record / "episode.mp4"


def clip_file(record: Path, call_id: int) -> Path:
    # Clips are named after their call (`<id>_<tool>`, perhaps with a segment suffix).
    pattern = re.compile(rf"^{call_id:05d}_move_to\b.*\.mp4$")
    found = [p for p in (record / "clips").glob("*.mp4") if pattern.match(p.name)] if (record / "clips").is_dir() else []
    return found[0] if found else record / "clips" / f"{call_id:05d}_move_to.mp4"


def check(all_spans: list[Span], kind: str) -> tuple[str, list[str]]:
    """The counts for the spans of `kind` ("episode" or "clip"), and each broken crash promise."""
    chosen = [s for s in all_spans if s.name.startswith(kind)]
    with_frames = [s for s in chosen if s.recorded_s > 0.03]  # the first frame comes one 20 ms step into a move
    playable = [s for s in with_frames if s.seen.playable]
    worst = max((s.lost_s for s in with_frames), default=0.0)
    summary = f"{kind}: {len(playable)}/{len(with_frames)} playable, max lost {worst:.2f} s"
    problems = []
    for span in chosen:
        where = f"{span.name}: recorded {span.recorded_s:.2f} s, file has {span.seen}"
        if span.lost_s > MAX_LOST_S:
            problems.append(f"lost {span.lost_s:.2f} s; {where}")
        if span.seen.last_s > span.recorded_s + 0.1:
            problems.append(f"more video than was recorded (test bookkeeping?); {where}")
        if span.recorded_s > PLAYABLE_AFTER_S and not span.seen.playable:
            problems.append(f"unplayable; {where}")
        if span.seen.playable and span.seen.frames < span.seen.packets - 1:
            problems.append(f"damaged before the torn tail; {where}")
    return summary, problems


def assert_crash_safe(all_spans: list[Span], kills: int, *kinds: str) -> None:
    results = [check(all_spans, kind) for kind in kinds]
    summary = f"{kills} kills; " + "; ".join(summary for summary, _ in results)
    problems = [problem for _, found in results for problem in found]
    assert not problems, summary + "\n" + "\n".join(problems)
    print(f"\n{summary}")


@pytest.mark.slow
@pytest.mark.timeout(170)
def test_sigkill_at_random_moments_leaves_a_playable_episode_missing_at_most_a_second(tmp_path: Path) -> None:
    ffprobe()  # fail at once, with the fix, when ffprobe is missing
    recipe = write_recipe(tmp_path)
    moments = spread(random.Random(13), RUN_S, 12)

    def one_kill(index: int, delay: float) -> list[Span]:
        out = tmp_path / f"kill-{index:02d}"
        process = subprocess.Popen(runner(recipe, out), cwd=ROOT, text=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        return spans(out, kill_after(process, delay))

    assert_crash_safe(two_at_a_time(one_kill, moments), len(moments), "episode")


@pytest.mark.slow
@pytest.mark.timeout(170)
def test_sigkill_at_random_moments_leaves_playable_action_clips(tmp_path: Path) -> None:
    # Clips exist where the dashboard runs the task, so the runner runs with --dashboard.
    ffprobe()
    recipe = write_recipe(tmp_path)
    moments = spread(random.Random(31), RUN_S - 0.4, 12)  # from the task's start, not the launch

    def one_kill(index: int, delay: float) -> list[Span]:
        out = tmp_path / f"kill-{index:02d}"
        process = subprocess.Popen(runner(recipe, out, "--dashboard", "--port", "0"), cwd=ROOT, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            assert process.stdout is not None
            line = process.stdout.readline()  # "rpent dashboard: http://127.0.0.1:PORT/"
            assert line.startswith("rpent dashboard: http://127.0.0.1:"), line
            with httpx.Client(base_url=line.split(": ", 1)[1].strip(), timeout=10) as client:
                assert client.post("/api/tasks", json={"fields": {}}).status_code == 201
            killed_at = kill_after(process, delay)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(30)
        return spans(out / "task-001", killed_at)

    assert_crash_safe(two_at_a_time(one_kill, moments), len(moments), "episode", "clip")
