"""`rpent run` end to end on the toy robot: artifacts, config errors, failures, interrupts, replay."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import pytest

from rpent.cli.main import main
from rpent.record.steps import read_steps

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "robots" / "toy" / "recipes" / "red_block_in_bin.jsonl"
TOOL_SEQUENCE = [json.loads(line)["tool"] for line in RECIPE.read_text().splitlines()]


def run_toy(tmp_path: Path, *extra: str, recipe: Path = RECIPE) -> tuple[int, Path]:
    out = tmp_path / "run"
    code = main(["run", "--robot", "toy", "--planner", "replay", "--recipe", str(recipe), "--output-dir", str(out), "--quiet", *extra])
    return code, out


def video_frames(path: Path) -> int:
    with av.open(str(path)) as container:
        return sum(1 for _ in container.decode(video=0))


def test_replay_run_writes_the_whole_record(tmp_path):
    code, out = run_toy(tmp_path)
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "finished"
    assert result["finish_status"] == "success"
    assert result["solved"] is True
    assert result["turns"] == len(TOOL_SEQUENCE)
    assert result["wall_time_s"] > 0

    steps = read_steps(out / "steps.jsonl")
    assert [s["tool"] for s in steps] == [*TOOL_SEQUENCE, "finish"]
    assert all(s["error"] is None for s in steps)
    move = steps[1]
    assert move["arguments"] == {"x_m": 0.1, "y_m": 0.45, "z_m": 0.1}
    assert move["images"] == ["00002_move_to_top.png"] and (out / "images" / "00002_move_to_top.png").exists()
    assert move["duration_s"] > 0 and json.loads(move["result"])["action"] == "move_to"

    transcript = json.loads((out / "transcript.json").read_text())
    assert [t["tool"] for t in transcript] == [*TOOL_SEQUENCE, "finish"]
    assert "task ended: status=finished" in (out / "run.log").read_text()
    assert video_frames(out / "episode.mp4") > 20

    recipe = [json.loads(line) for line in (out / "recipe_toy.jsonl").read_text().splitlines()]
    assert [r["tool"] for r in recipe] == TOOL_SEQUENCE


def test_successful_run_is_published_to_the_memory_inbox(tmp_path):
    memory = tmp_path / "memory"
    code, out = run_toy(tmp_path, "--memory-dir", str(memory))
    assert code == 0
    published = list((memory / "inbox").iterdir())
    assert len(published) == 1
    assert sorted(p.name for p in published[0].iterdir()) == ["recipe_toy.jsonl", "result.json", "steps.jsonl"]
    # A second run never overwrites the first one's files.
    code, _ = run_toy(tmp_path / "again", "--memory-dir", str(memory))
    assert code == 0
    assert len(list((memory / "inbox").iterdir())) == 2


def test_replaying_a_recorded_recipe_reproduces_the_tool_sequence(tmp_path):
    code, first = run_toy(tmp_path / "a")
    assert code == 0
    code, second = run_toy(tmp_path / "b", recipe=first / "recipe_toy.jsonl")
    assert code == 0

    def calls(out: Path) -> list[tuple[str, dict]]:
        return [(s["tool"], s["arguments"]) for s in read_steps(out / "steps.jsonl") if s["tool"] != "finish"]

    assert calls(first) == calls(second)
    assert len(calls(first)) == len(TOOL_SEQUENCE)
    assert json.loads((second / "result.json").read_text())["solved"] is True


def test_unsolved_task_is_not_published_and_exits_1(tmp_path):
    memory = tmp_path / "memory"
    code, out = run_toy(tmp_path, "--target-block", "blue", "--memory-dir", str(memory))
    assert code == 1
    result = json.loads((out / "result.json").read_text())
    assert result["finish_status"] == "success" and result["solved"] is False
    assert not (out / "recipe_toy.jsonl").exists()
    assert not (memory / "inbox").exists() or not any((memory / "inbox").iterdir())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--speed", "5"], "--speed: must be > 0 and <= 2"),
        (["--target-block", "green"], "--target-block: must be one of"),
        (["--max-turns", "0"], "--max-turns: must be >= 1"),
        (["--recipe-tag", "../x"], "--recipe-tag: must match"),
    ],
)
def test_config_errors_exit_2_naming_the_option(tmp_path, capsys, extra, message):
    code, out = run_toy(tmp_path, *extra)
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()  # nothing started, nothing written


def test_a_robot_named_with_an_equals_sign_gets_its_own_options(tmp_path, capsys):
    code = main(["run", "--robot=toy", "--planner", "replay", "--speed", "5", "--output-dir", str(tmp_path / "r")])
    assert code == 2
    assert "--speed: must be > 0 and <= 2" in capsys.readouterr().err


def test_replay_without_recipe_is_a_config_error(tmp_path, capsys):
    code = main(["run", "--robot", "toy", "--planner", "replay", "--output-dir", str(tmp_path / "r")])
    assert code == 2
    assert "--recipe: required with --planner replay" in capsys.readouterr().err


def test_bad_recipe_is_refused_before_anything_moves(tmp_path, capsys):
    recipe = tmp_path / "bad.jsonl"
    recipe.write_text('{"tool": "move_to", "arguments": {"x_m": 0.1, "y_m": 0.1}}\n{"tool": "move_to", "arguments": {"x_m": 9, "y_m": 0.1}}\n')
    code, out = run_toy(tmp_path, recipe=recipe)
    assert code == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:2" in err and "x_m" in err and "less than or equal to 0.6" in err
    assert not out.exists()
    recipe.write_text('{"tool": "teleport"}\n')
    assert run_toy(tmp_path, recipe=recipe)[0] == 2
    assert "unknown tool 'teleport'" in capsys.readouterr().err
    recipe.write_text("{not json\n")
    assert run_toy(tmp_path, recipe=recipe)[0] == 2
    assert "bad.jsonl:1: not valid JSON" in capsys.readouterr().err


def test_unknown_robot_exits_2(capsys):
    assert main(["run", "--robot", "warp_drive", "--planner", "replay"]) == 2
    assert "unknown robot 'warp_drive'" in capsys.readouterr().err


def test_handler_exception_is_recorded_and_the_run_still_cleans_up(tmp_path, monkeypatch):
    from robots.toy import runtime

    def jammed(self):
        raise RuntimeError("gripper jammed")

    monkeypatch.setattr(runtime.ToyWorld, "grasp", jammed)
    code, out = run_toy(tmp_path)
    assert code == 1
    steps = read_steps(out / "steps.jsonl")
    assert [s["tool"] for s in steps] == TOOL_SEQUENCE[:4]
    assert steps[-1]["error"] == "RuntimeError: gripper jammed"
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "error"
    assert "step 4 (grasp, line 4) failed: RuntimeError: gripper jammed" in result["stop_reason"]
    assert video_frames(out / "episode.mp4") > 0  # frames of the moves before the failure


def _start_slow_run(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    out = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "rpent", "run", "--robot", "toy", "--planner", "replay", "--recipe", str(RECIPE),
         "--output-dir", str(out), "--speed", "0.02", "--quiet"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    return process, out


def _wait_for(condition, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def _wait_for_steps(path: Path, count: int, timeout: float = 60) -> None:
    """Wait (bounded) for the run to have recorded `count` calls; the slow move then keeps it busy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(read_steps(path)) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never reached {count} steps")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigint_cancels_the_motion_and_keeps_the_record(tmp_path):
    process, out = _start_slow_run(tmp_path)
    try:
        _wait_for_steps(out / "steps.jsonl", 1)  # get_state done; the first move (~10 s at 0.02 m/s) runs
        _wait_for(lambda: (out / "episode.mp4").exists())  # the move has recorded frames
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    finally:
        process.kill()
    assert code == 130
    steps = read_steps(out / "steps.jsonl")
    assert [s["tool"] for s in steps] == ["get_state", "move_to"]
    assert steps[1]["cancelled"] is True and "cancelled" in steps[1]["error"]
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "aborted"
    assert result["finish_result"]["operator_aborted"] is True
    assert video_frames(out / "episode.mp4") > 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_leaves_steps_intact_up_to_the_last_completed_call(tmp_path):
    process, out = _start_slow_run(tmp_path)
    try:
        _wait_for_steps(out / "steps.jsonl", 1)
        process.kill()
        process.wait(timeout=30)
    finally:
        process.kill()
    raw = (out / "steps.jsonl").read_text()
    assert raw.endswith("\n")
    steps = [json.loads(line) for line in raw.splitlines()]
    assert [s["tool"] for s in steps] == ["get_state"]
    assert not (out / "result.json").exists()
