"""What an episode sees on its worker: the driver's paths, the driver's recipe, its own simulator
addresses, and one clean line when it fails (run in process here: run_episode imports nothing of Ray)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from eval_helpers import REPO, TOY_RECIPE

from rpent.eval.episode import EpisodeFailed, run_args, run_episode
from rpent.eval.records import RECIPES_DIR
from rpent.eval.sweep import parse_sweep
from rpent.loopback import hosts_text, loopback_hosts, split_hosts


def test_relative_recipe_and_memory_paths_are_made_absolute_where_the_sweep_was_typed(tmp_path):
    sweep = parse_sweep({"robot": "libero", "suites": ["libero_object"], "tasks": [3],
                         "recipe": "recipes/{suite}_task{task}.jsonl", "memory_dir": "~/mem"}).with_paths_from(tmp_path)
    assert sweep.recipe_for(sweep.episodes()[0]) == tmp_path / "recipes" / "libero_object_task3.jsonl"
    assert sweep.memory_dir == str(Path.home() / "mem")


def test_an_episode_whose_node_lacks_the_recipe_replays_the_drivers_copy_from_the_sweep_folder(tmp_path):
    missing = tmp_path / "only-on-the-driver" / "red.jsonl"
    sweep = parse_sweep({"robot": "toy", "recipe": str(missing), "memory_per_episode_mb": 256})
    episode = sweep.episodes()[0]
    result = run_episode(sweep.model_dump(), episode.fields(), str(tmp_path / "sweep"),
                         recipe_text=Path(TOY_RECIPE).read_text())
    assert result["solved"] is True
    copy = tmp_path / "sweep" / RECIPES_DIR / episode.id / "red.jsonl"
    assert copy.read_text() == Path(TOY_RECIPE).read_text()
    transcript = json.loads((tmp_path / "sweep" / episode.id / "transcript.json").read_text())
    assert "red.jsonl" in json.dumps(transcript)


def test_a_failed_episode_raises_one_line_and_keeps_its_traceback_in_the_records_run_log(tmp_path):
    sweep = parse_sweep({"robot": "toy", "recipe": TOY_RECIPE, "robot_args": ["--no-such-flag"]})
    episode = sweep.episodes()[0]
    with pytest.raises(EpisodeFailed) as failed:
        run_episode(sweep.model_dump(), episode.fields(), str(tmp_path / "sweep"))
    message = str(failed.value)
    run_log = tmp_path / "sweep" / episode.id / "run.log"
    assert "\n" not in message and message.startswith("episode toy-rep0: robot_args: robot toy has no flag --no-such-flag")
    assert message.endswith(f"(traceback in {run_log})")
    assert "Traceback (most recent call last)" in run_log.read_text()


def test_robot_args_resolve_in_the_drivers_folder_when_the_worker_has_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a worker starts in the head's folder, not the driver's
    sweep = parse_sweep({"robot": "toy", "recipe": TOY_RECIPE})
    result = run_episode(sweep.model_dump(), sweep.episodes()[0].fields(), str(tmp_path / "sweep"),
                         driver_folder=str(REPO))
    assert result["solved"] is True and Path(os.getcwd()) == REPO


def test_concurrent_simulated_episodes_get_disjoint_blocks_of_the_sweeps_addresses(tmp_path):
    hosts = loopback_hosts("127.0.0.140-169", "--sim-hosts")
    assert len(hosts) == 30 and hosts[0] == "127.0.0.140" and hosts[-1] == "127.0.0.169"
    assert [hosts_text(b) for b in split_hosts(hosts, 4)] == [
        "127.0.0.140-147", "127.0.0.148-155", "127.0.0.156-162", "127.0.0.163-169"]
    sweep = parse_sweep({"robot": "franka", "seeds": [1, 2], "planner": "api", "concurrency": 2,
                         "sim_hosts": "127.0.0.140-169"})
    blocks = sweep.sim_host_blocks()
    assert blocks == ["127.0.0.140-154", "127.0.0.155-169"]
    args, _, _ = run_args(sweep, sweep.episodes()[1], tmp_path, sim_hosts=blocks[1])
    assert (args.sim, args.sim_seed, args.sim_hosts) == (True, 2, "127.0.0.155-169")
    # A robot without simulator addresses gets none.
    toy = parse_sweep({"robot": "toy", "recipe": TOY_RECIPE})
    args, _, _ = run_args(toy, toy.episodes()[0], tmp_path, sim_hosts="127.0.0.140-169")
    assert not hasattr(args, "sim_hosts")
