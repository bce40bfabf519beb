"""Ordinary situations an operator meets in the first hour: one clear line on the terminal, the
documented exit code, and the traceback in run.log only."""

from __future__ import annotations

import json

import pytest

from .cli_support import REPO, rpent

TOY_RECIPE = str(REPO / "robots/toy/recipes/red_block_in_bin.jsonl")


def _no_traceback(stderr: str) -> None:
    assert "Traceback (most recent call last)" not in stderr, stderr
    assert '  File "' not in stderr, stderr


def test_output_dir_that_is_a_file_is_bad_configuration_exit_2(tmp_path):
    existing = tmp_path / "notes.txt"
    existing.write_text("mine\n")
    done = rpent("run", "--robot", "toy", "--planner", "replay", "--recipe", TOY_RECIPE, "--output-dir", str(existing))
    assert done.returncode == 2, done.stderr
    assert "--output-dir" in done.stderr and "is a file" in done.stderr
    _no_traceback(done.stderr)
    assert existing.read_text() == "mine\n"


@pytest.mark.slow
def test_real_arm_that_does_not_answer_is_one_line_naming_host_and_sim_flag(tmp_path):
    # Forgetting --sim: the default config points at an FCI host that is not there (5 s connect timeout).
    out = tmp_path / "run"
    recipe = str(REPO / "robots/franka/recipes/pick_cube.jsonl")
    done = rpent("run", "--robot", "franka", "--planner", "replay", "--recipe", recipe, "--output-dir", str(out))
    assert done.returncode == 1, done.stderr
    _no_traceback(done.stderr)
    failed = [line for line in done.stderr.splitlines() if "starting the runtime failed" in line]
    assert len(failed) == 1, done.stderr
    assert "could not connect to the Franka arm at" in failed[0]
    assert "add --sim" in failed[0] and "traceback in run.log" in failed[0]
    run_log = (out / "run.log").read_text()
    assert "Traceback (most recent call last)" in run_log and "RuntimeFault" in run_log


@pytest.mark.slow
def test_safety_refusal_is_one_line_and_the_traceback_is_in_run_log(tmp_path):
    recipe = tmp_path / "sideways.jsonl"  # inside every schema range, but the hand would point sideways
    recipe.write_text(json.dumps({"tool": "move_to", "arguments": {
        "x_m": 0.5, "y_m": 0.0, "z_m": 0.3, "roll_rad": 1.5708, "pitch_rad": 0.0, "yaw_rad": 0.0}}) + "\n")
    out = tmp_path / "run"
    done = rpent("run", "--robot", "franka", "--sim", "--planner", "replay", "--recipe", str(recipe),
                 "--output-dir", str(out))
    assert done.returncode == 1, done.stderr
    _no_traceback(done.stderr)
    refused = [line for line in done.stderr.splitlines() if "MotionRefused" in line]
    assert len(refused) == 1, done.stderr
    assert "max_tilt_deg" in refused[0] and "the robot did not move" in refused[0]
    run_log = (out / "run.log").read_text()
    assert "Traceback (most recent call last)" in run_log and "MotionRefused" in run_log


def test_a_recipe_step_past_the_envelope_is_refused_before_anything_starts(tmp_path):
    recipe = tmp_path / "below_table.jsonl"
    recipe.write_text(json.dumps({"tool": "move_to", "arguments": {"x_m": 0.5, "y_m": 0.0, "z_m": -0.2}}) + "\n")
    out = tmp_path / "run"
    done = rpent("run", "--robot", "franka", "--sim", "--planner", "replay", "--recipe", str(recipe),
                 "--output-dir", str(out))
    assert done.returncode == 2, done.stderr  # the schema's z_m range is the envelope's workspace_m.z
    assert done.stderr.strip() == (f"rpent: error: {recipe}:1: invalid arguments for tool 'move_to': "
                                   "z_m: Input should be greater than or equal to 0.21 (got -0.2)")
    assert not out.exists()  # nothing started, nothing written


@pytest.mark.slow
def test_dashboard_whose_real_arm_does_not_answer_is_one_line_naming_the_sim_flag(tmp_path):
    done = rpent("run", "--robot", "franka", "--dashboard", "--port", "0", "--output-dir", str(tmp_path / "session"))
    assert done.returncode == 1, done.stderr
    _no_traceback(done.stderr)
    failed = [line for line in done.stderr.splitlines() if "could not start the robot" in line]
    assert len(failed) == 1, done.stderr
    assert "could not connect to the Franka arm at" in failed[0] and "add --sim" in failed[0]
