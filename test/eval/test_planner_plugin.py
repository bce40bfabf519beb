"""`--planner package.module:Class`: a planner plugin, taken by `rpent run` and `rpent eval` alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from eval_helpers import REPO

HERE = Path(__file__).resolve().parent


def rpent(*argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), str(REPO)]))
    return subprocess.run([sys.executable, "-m", "rpent", *argv], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=240)


def test_rpent_run_plans_with_a_plugin_named_module_colon_class(tmp_path):
    done = rpent("run", "--robot", "toy", "--planner", "eval_plugins:RecipeReplayPlanner", "--quiet",
                 "--output-dir", str(tmp_path / "run"), "--memory-dir", str(tmp_path / "memory"))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert (result["planner"], result["solved"]) == ("eval_plugins:RecipeReplayPlanner", True)


def test_a_planner_that_is_neither_a_registry_name_nor_module_colon_class_is_refused_by_the_flag(tmp_path):
    done = rpent("run", "--robot", "toy", "--planner", "gpt-9", "--output-dir", str(tmp_path / "run"))
    assert done.returncode == 2
    assert "--planner: must be one of api, claude_code, codex, replay or package.module:Class, got 'gpt-9'" in done.stderr
    assert not (tmp_path / "run").exists()


def test_a_plugin_that_is_not_a_planner_is_refused_naming_the_planner(tmp_path):
    done = rpent("run", "--robot", "toy", "--planner", "json:JSONDecoder", "--output-dir", str(tmp_path / "run"))
    assert done.returncode == 2
    assert "planner: json:JSONDecoder is not a Planner subclass" in done.stderr
