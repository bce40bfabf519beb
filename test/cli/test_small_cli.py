"""The small things a newcomer types in the first hour: --version, a misspelled flag, the run's one
timestamp, default ports that do not collide, readable tool schemas on a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

from .cli_support import REPO, rpent, rpent_env

TOY_RECIPE = str(REPO / "robots/toy/recipes/red_block_in_bin.jsonl")


def test_version_prints_the_installed_version():
    import importlib.metadata

    done = rpent("--version")
    assert done.returncode == 0
    assert done.stdout.strip() == f"rpent {importlib.metadata.version('rpent')}"


def test_misspelled_run_flag_shows_runs_usage_not_the_top_level_one():
    done = rpent("run", "--robot", "toy", "--planer", "replay")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: rpent run "), done.stderr
    assert "rpent run: error: unrecognized arguments: --planer replay" in done.stderr


def test_misspelled_tools_flag_shows_tools_usage():
    done = rpent("tools", "--robot", "toy", "--jsn")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: rpent tools "), done.stderr
    assert "unrecognized arguments: --jsn" in done.stderr


def test_one_run_carries_one_timestamp(tmp_path):
    # Default output dir (runs/<robot>-<time>) in a scratch working directory, memory in tmp_path.
    memory = tmp_path / "memory"
    env = rpent_env(RPENT_MEMORY_DIR=str(memory))
    done = subprocess.run([sys.executable, "-m", "rpent", "run", "--robot", "toy", "--planner", "replay",
                           "--recipe", TOY_RECIPE], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    [folder] = (tmp_path / "runs").iterdir()
    run_id = re.search(r"run (\S+): robot=toy", done.stderr).group(1)
    [inbox_copy] = (memory / "toy" / "inbox").iterdir()
    assert folder.name == run_id == inbox_copy.name


def test_dashboard_and_serve_mcp_default_to_different_ports():
    run_help = rpent("run", "--robot", "toy", "--help").stdout
    mcp_help = rpent("serve-mcp", "--robot", "toy", "--help").stdout
    dashboard = re.search(r"dashboard port \(default (\d+)", " ".join(run_help.split())).group(1)
    mcp = re.search(r"HTTP port; 0 picks a free one \(default (\d+)", " ".join(mcp_help.split())).group(1)
    assert dashboard == "8080"  # the README's dashboard command
    assert dashboard != mcp


def _tools_on_a_terminal(*flags: str, robot: str = "toy") -> str:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "rpent", "tools", "--robot", robot, *flags], cwd=REPO,
                            env=rpent_env(), stdout=follower, stderr=subprocess.PIPE)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the command closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(60) == 0
    return b"".join(chunks).decode().replace("\r\n", "\n")


def _longest_line(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_tools_list_each_parameter_on_one_line_on_a_terminal():
    listing = _tools_on_a_terminal(robot="franka")
    assert len(listing.splitlines()) < 120, listing  # not 600 lines of JSON Schema
    assert "schema:" not in listing and "anyOf" not in listing and '"type"' not in listing
    lines = listing.splitlines()
    assert lines[0] == "move_to: Move the gripper (its fingertip centre) to a pose in the robot base frame."
    x = next(line for line in lines if line.strip().startswith("x_m "))
    assert re.fullmatch(r"  x_m +number \[0\.3, 0\.7\], required +Target x in metres\.", x), x
    speed = next(line for line in lines if line.strip().startswith("speed_factor "))
    assert "number (0, 0.3], optional" in speed  # an optional input, plainly
    grasp_force = next(line for line in lines if line.strip().startswith("force_n "))
    assert "number (0, 40], default 20" in grasp_force
    assert "get_state (read-only): " in listing and "  (no parameters)" in listing
    assert _tools_on_a_terminal("--list", robot="franka") == listing


def test_tools_schemas_are_behind_a_flag_indented_on_a_terminal_and_one_line_when_piped():
    on_terminal = _tools_on_a_terminal("--schema")
    piped = rpent("tools", "--robot", "toy").stdout
    terminal_schemas = [line for line in on_terminal.splitlines() if line.startswith("  schema: ")]
    assert terminal_schemas and all(line == "  schema: {" for line in terminal_schemas), on_terminal
    assert _longest_line(on_terminal) < _longest_line(piped) / 2
    schema_lines = [line for line in piped.splitlines() if line.startswith("  schema: ")]
    assert schema_lines and all(json.loads(line[len("  schema: "):]) for line in schema_lines)
    assert _longest_line(_tools_on_a_terminal("--compact")) == _longest_line(piped)
    assert _longest_line(rpent("tools", "--robot", "toy", "--pretty").stdout) == _longest_line(on_terminal)
