"""The bundled pick replayed on a seeded scene where the cube is not under the gripper: the grasp closes
on nothing, and the console, the record and the replay say so instead of reporting a success."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rpent.record.steps import read_steps

ROOT = Path(__file__).resolve().parents[2]
PICK = ROOT / "robots" / "franka" / "recipes" / "pick_cube.jsonl"
SEED_WITH_THE_CUBE_ELSEWHERE = "7"  # the cube starts at (0.547, 0.2145): the recipe grasps at (0.5, 0)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _replay(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "rpent", "run", "--robot", "franka", "--sim", "--sim-seed", SEED_WITH_THE_CUBE_ELSEWHERE,
         "--planner", "replay", "--recipe", str(PICK), "--output-dir", str(out),
         "--memory-dir", str(tmp_path / "memory"), *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=200, env={**_env(), "MUJOCO_GL": "egl"},
    )
    return done, out


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "RPENT_MODEL")}


def test_the_replay_stops_at_a_grasp_that_closed_on_nothing(tmp_path):
    done, out = _replay(tmp_path)
    assert done.returncode == 1, done.stderr
    grasp_lines = [line for line in done.stderr.splitlines() if " tool grasp (" in line]
    assert len(grasp_lines) == 1 and grasp_lines[0].endswith("failed: grasped=false"), done.stderr
    stop = "step 5 (grasp, line 5) did not do what the recipe expects: the robot reported grasped=false"
    assert stop in done.stderr
    steps = read_steps(out / "steps.jsonl")
    assert [s["tool"] for s in steps] == ["home", "open_gripper", "move_to", "move_to", "grasp"]  # no lift, no finish
    assert steps[-1]["status"] == "failed" and steps[-1]["outcome"] == {"grasped": False}
    assert all(s["status"] == "ok" for s in steps[:-1])
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "error" and result["stop_reason"] == stop
    assert result["finish_status"] is None and result["solved"] is False
    assert not (out / "recipe_franka.jsonl").exists()


def test_a_finish_claiming_success_that_solved_disagrees_with_is_flagged(tmp_path):
    done, out = _replay(tmp_path, "--continue-on-error")  # goes on to the recipe's own finish: success
    assert done.returncode == 1, done.stderr
    warning = "finish=success but solved()=False: the planner's report and the robot's own check disagree"
    assert warning in done.stderr
    assert warning in (out / "run.log").read_text()
    result = json.loads((out / "result.json").read_text())
    assert result["finish_status"] == "success" and result["solved"] is False
    assert result["disagreement"].startswith(warning)
    assert [s["tool"] for s in read_steps(out / "steps.jsonl")][-2:] == ["move_by", "finish"]
