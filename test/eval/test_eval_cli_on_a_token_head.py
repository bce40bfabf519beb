"""`rpent eval` typed in a shell against a Ray head started the way docs/eval.md says: token
authentication, started from a folder of its own on a machine whose HOME had no token yet.

The head is the docs' own commands (read from docs/eval.md), run on a free loopback port with
`--block` (so the test owns it and stops it by its id) and a temp dir of its own. Every `rpent
eval` is a subprocess, as a user runs it, with bounded waits.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from eval_helpers import REPO, free_port, running_head, short_temp_dir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
DOCS = REPO / "docs" / "eval.md"
TOY_RECIPE = "robots/toy/recipes/red_block_in_bin.jsonl"
FRANKA_RECIPE = REPO / "robots/franka/recipes/pick_cube.jsonl"
VISION_PICK = "scripted_pick:RedCubePickPlanner"  # test/franka/scripted_pick.py: sees only tool outputs
SIM_HOSTS = (140, 169)  # this file's own franky-sim addresses: 127.0.0.140-169
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class DocsHead:
    address: str
    home: Path  # the HOME the docs' commands ran in: its ~/.ray/auth_token is the cluster's token
    pid: int


def docs_token_commands() -> list[tuple[dict[str, str], list[str]]]:
    """(environment assignments, argv) of each line of the docs' token example."""
    text = DOCS.read_text()
    at = text.index("A head on this machine")
    block = text[text.index("```", at) + 3 : text.index("```", text.index("```", at) + 3)]
    commands = []
    for line in block.strip().splitlines():
        words = shlex.split(line, comments=True)
        env = {}
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        commands.append((env, words))
    return commands


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """This machine's environment as a new user has it: no Ray token or mode of the test session
    (an empty value in `extra` leaves that variable out)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # The head's workers import the test plugins (installed on every node, as docs/eval.md asks).
    env.update(HOME=str(home), PYTHONPATH=os.pathsep.join([str(HERE), str(REPO / "test" / "franka"), str(REPO)]), **extra)
    return {k: v for k, v in env.items() if v != ""}


@pytest.fixture(scope="module")
def docs_head(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    folder = tmp_path_factory.mktemp("head-folder")  # not the checkout: workers start here
    temp_dir = short_temp_dir("rt-")
    commands = docs_token_commands()
    (token_env, token_argv), (head_env, head_argv) = commands[0], commands[1]
    assert token_argv[:2] == ["ray", "get-auth-token"] and head_argv[:3] == ["ray", "start", "--head"], commands
    subprocess.run([str(BIN / "ray"), *token_argv[1:]], env=clean_env(home, **token_env), cwd=folder,
                   check=True, capture_output=True, timeout=60)
    port = free_port()
    argv = [str(BIN / "ray"), *head_argv[1:]]
    argv[argv.index("--port") + 1] = str(port)
    argv += ["--block", f"--temp-dir={temp_dir}", "--num-cpus=2", "--disable-usage-stats"]
    with running_head(argv, env=clean_env(home, **head_env), cwd=folder, temp_dir=temp_dir) as head:
        yield DocsHead(f"127.0.0.1:{port}", home, head.pid)


def finish_summary(record: Path) -> str:
    """What the planner's finish said in an episode's record (its result.json), or why there is none."""
    try:
        return str((json.loads((record / "result.json").read_text()).get("finish_result") or {}).get("summary"))
    except (OSError, ValueError) as exc:
        return f"no result.json: {exc}"


def rpent_eval(head: DocsHead, cwd: Path, *flags: str, home: Path | None = None, timeout_s: float = 600,
               **env: str) -> subprocess.CompletedProcess:
    """`RAY_AUTH_MODE=token rpent eval ... --ray-address <head>` as the docs' last line has it."""
    driver_env, driver_argv = docs_token_commands()[2]
    assert driver_argv[:2] == ["rpent", "eval"] and "--ray-address" in driver_argv, driver_argv
    return subprocess.run(
        [str(BIN / "rpent"), "eval", *flags, "--ray-address", head.address],
        env=clean_env(home or head.home, **{**driver_env, **env}), cwd=cwd, capture_output=True, text=True,
        timeout=timeout_s,
    )


def test_the_docs_token_example_runs_a_sweep_with_a_relative_recipe_and_out_from_another_folder(docs_head, tmp_path):
    driver = tmp_path / "driver"  # neither the head's folder nor the checkout
    (driver / "recipes").mkdir(parents=True)
    shutil.copy(REPO / TOY_RECIPE, driver / "recipes" / "red.jsonl")
    done = rpent_eval(docs_head, driver, "--robot", "toy", "--recipe", "recipes/red.jsonl", "--repeats", "2",
                      "--memory-per-episode-mb", "256", "--out", "sweep")
    assert done.returncode == 0, done.stderr
    results = json.loads((driver / "sweep" / "results.json").read_text())
    assert [(r["status"], r["solved"]) for r in results["episodes"]] == [("finished", True)] * 2, results["episodes"]
    assert results["sweep"]["recipe"] == str(driver / "recipes" / "red.jsonl")  # resolved where it was typed


def test_a_driver_without_the_clusters_token_is_told_in_one_line_what_to_do(docs_head, tmp_path):
    fresh = tmp_path / "fresh-home"  # a second machine: no ~/.ray/auth_token
    fresh.mkdir()
    flags = ("--robot", "toy", "--recipe", str(REPO / TOY_RECIPE), "--memory-per-episode-mb", "256")
    no_token = rpent_eval(docs_head, tmp_path, *flags, "--out", str(tmp_path / "a"), home=fresh, timeout_s=120)
    assert no_token.returncode == 2 and "Traceback" not in no_token.stderr, no_token.stderr
    assert no_token.stderr.splitlines() == [
        f"rpent: error: --ray-address: the Ray cluster at {docs_head.address} needs its token and none was found: "
        "set RAY_AUTH_TOKEN, or put the token in ~/.ray/auth_token (`ray get-auth-token` on the head prints it; "
        "docs/eval.md)"
    ]
    no_mode = rpent_eval(docs_head, tmp_path, *flags, "--out", str(tmp_path / "b"), home=fresh, timeout_s=180,
                         RAY_AUTH_MODE="")
    assert no_mode.returncode == 2 and "Traceback" not in no_mode.stderr, no_mode.stderr
    (line,) = no_mode.stderr.splitlines()
    assert line.startswith(f"rpent: error: --ray-address: cannot reach a Ray cluster at {docs_head.address} "), line
    assert line.endswith("; a cluster with token authentication also needs RAY_AUTH_MODE=token and its token "
                         "(RAY_AUTH_TOKEN or ~/.ray/auth_token; docs/eval.md)"), line


def test_a_crashed_episode_has_one_clean_line_in_results_and_its_traceback_in_run_log(docs_head, tmp_path):
    # franky-sim of the one episode finds every address of its block taken: its runtime cannot start.
    host = f"127.0.0.{SIM_HOSTS[0]}"
    with socket.socket() as taken:
        taken.bind((host, 1337))
        taken.listen(1)
        done = rpent_eval(docs_head, tmp_path, "--robot", "franka", "--seeds", "1", "--recipe", str(FRANKA_RECIPE),
                          "--sim-hosts", host, "--concurrency", "1", "--retries", "0", "--out", str(tmp_path / "sweep"))
    assert done.returncode == 1, done.stderr
    (row,) = json.loads((tmp_path / "sweep" / "results.json").read_text())["episodes"]
    assert row["status"] == "crashed"
    error = row["error"]
    assert "\n" not in error and not ANSI.search(error) and "Traceback" not in error, repr(error)
    assert error.startswith("episode franka-seed1-rep0: starting the runtime failed: RuntimeFault: franky-sim could "
                            "not bind a loopback address"), error
    assert error.endswith(f"(traceback in {tmp_path / 'sweep' / 'franka-seed1-rep0' / 'run.log'})"), error
    run_log = (tmp_path / "sweep" / "franka-seed1-rep0" / "run.log").read_text()
    assert "Traceback (most recent call last)" in run_log and "could not bind a loopback address" in run_log


def test_a_seed_sweep_of_the_simulated_franka_runs_two_episodes_at_once_on_addresses_of_their_own(docs_head, tmp_path):
    first, last = SIM_HOSTS
    done = rpent_eval(docs_head, tmp_path, "--robot", "franka", "--seeds", "1-2", "--planner", VISION_PICK,
                      "--max-turns", "30", "--concurrency", "2", "--sim-hosts", f"127.0.0.{first}-{last}",
                      "--out", str(tmp_path / "sweep"))
    assert done.returncode == 0, done.stderr
    rows = json.loads((tmp_path / "sweep" / "results.json").read_text())["episodes"]
    # A failed pick says why in its finish summary (the step that did not go as it must): shown, not just the row.
    said = {r["id"]: (r["status"], r["finish_status"], finish_summary(Path(r["record"]))) for r in rows}
    assert [(r["status"], r["solved"]) for r in rows] == [("finished", True)] * 2, said
    spans, hosts = [], []
    for row in rows:
        record = Path(row["record"])
        started = json.loads((record / "segments.jsonl").read_text().splitlines()[0])["claimed_at"]
        spans.append((started, (record / "result.json").stat().st_mtime))
        (line,) = [x for x in (record / "run.log").read_text().splitlines() if "franky-sim: arms at" in x]
        hosts.append(line.rsplit("arms at ", 1)[1].strip())
    (a0, a1), (b0, b1) = spans
    assert a0 < b1 and b0 < a1, f"the two episodes did not overlap: {spans}"
    # Each episode had a block of the range to itself: no two simulators tried the same address.
    middle = first + (last - first + 1) // 2
    assert hosts[0] != hosts[1], hosts
    blocks = sorted(int(h.rsplit(".", 1)[1]) < middle for h in hosts)
    assert blocks == [False, True], hosts
