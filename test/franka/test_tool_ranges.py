"""The ranges in the Franka tools' schemas are the limits the arm enforces, read from the loaded safety
envelope (one source of truth): `rpent tools` shows them, the model is sent them, and a value outside
them is refused before anything moves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import FakeModelServer, Reply, ToolUse
from fakes.fixtures import model_server, model_server_process  # noqa: F401

from rpent.record.steps import read_steps

ROOT = Path(__file__).resolve().parents[2]


def _tools(*flags: str) -> dict[str, dict]:
    done = subprocess.run([sys.executable, "-m", "rpent", "tools", *flags, "--json"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return {t["name"]: t["input_schema"] for t in json.loads(done.stdout)}


def _number(schema: dict) -> dict:
    """The number alternative of an optional input (anyOf [number, null])."""
    return next((s for s in schema.get("anyOf", []) if s.get("type") == "number"), schema)


def test_the_schema_ranges_are_the_bundled_envelope(tmp_path):
    tools = _tools("--robot", "franka")
    move_to = tools["move_to"]["properties"]
    assert [(move_to[a]["minimum"], move_to[a]["maximum"]) for a in ("x_m", "y_m", "z_m")] == [
        (0.30, 0.70), (-0.30, 0.30), (0.21, 0.65)]  # config/franka_safety.yaml workspace_m
    assert _number(move_to["speed_factor"])["maximum"] == 0.30  # max_speed_factor
    move_by = tools["move_by"]["properties"]
    assert (_number(move_by["dz_m"])["minimum"], _number(move_by["dz_m"])["maximum"]) == (-0.10, 0.10)  # max_step_m
    assert _number(move_by["dyaw_rad"])["maximum"] == 0.6  # max_rotation_step_rad
    assert _number(tools["grasp"]["properties"]["force_n"])["maximum"] == 40.0  # max_gripper_force_n


def test_another_safety_file_gives_its_own_ranges(tmp_path):
    safety = tmp_path / "narrow.yaml"
    safety.write_text("default:\n  workspace_m: {x: [0.35, 0.60], y: [-0.2, 0.25], z: [0.25, 0.5]}\n"
                      "  max_step_m: 0.05\n  max_gripper_force_n: 25.0\n"
                      "arms:\n  right:\n    workspace_m: {x: [0.4, 0.65], y: [-0.3, 0.1], z: [0.25, 0.5]}\n")
    move_to = _tools("--robot", "franka", "--safety-file", str(safety))["move_to"]["properties"]
    assert (move_to["x_m"]["minimum"], move_to["x_m"]["maximum"]) == (0.35, 0.60)
    dual = _tools("--robot", "dual_franka", "--safety-file", str(safety))
    both = dual["move_both_to"]["properties"]
    assert (both["left_x_m"]["minimum"], both["left_x_m"]["maximum"]) == (0.35, 0.60)   # the left arm's box
    assert (both["right_x_m"]["minimum"], both["right_x_m"]["maximum"]) == (0.40, 0.65)  # the right arm's own
    one = dual["move_to"]["properties"]  # either arm: the union of their boxes
    assert (one["x_m"]["minimum"], one["x_m"]["maximum"]) == (0.35, 0.65)
    assert _number(dual["grasp"]["properties"]["force_n"])["maximum"] == 25.0


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_model_is_sent_the_enforced_ranges_and_a_value_outside_is_refused_before_moving(
    model_server: FakeModelServer, tmp_path  # noqa: F811
):
    model_server.script(
        Reply([ToolUse("move_to", {"x_m": 0.8, "y_m": 0.0, "z_m": 0.3})]),
        Reply([ToolUse("finish", {"status": "failure", "summary": "out of reach"})]),
    )
    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "RPENT_MODEL")}
    done = subprocess.run(
        [sys.executable, "-m", "rpent", "run", "--robot", "franka", "--sim", "--planner", "api", "--model", "fake-model",
         "--base-url", model_server.base_url, "--output-dir", str(out), "--memory-dir", str(tmp_path / "memory")],
        cwd=ROOT, env={**env, "ANTHROPIC_API_KEY": "test-key", "MUJOCO_GL": "egl"}, capture_output=True, text=True,
        timeout=150,
    )
    assert done.returncode == 1, done.stderr
    sent = {t["name"]: t["input_schema"] for t in model_server.model_requests[0].body["tools"]}
    assert (sent["move_to"]["properties"]["x_m"]["minimum"], sent["move_to"]["properties"]["x_m"]["maximum"]) == (0.3, 0.7)
    [move] = [s for s in read_steps(out / "steps.jsonl") if s["tool"] == "move_to"]
    assert move["status"] == "error" and "x_m: Input should be less than or equal to 0.7 (got 0.8)" in move["error"]
    assert move["duration_s"] == 0.0  # refused at validation, before the handler (nothing moved)
