"""What a sweep is and how a bad one is refused: before Ray starts, naming the field and the rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_helpers import TOY_RECIPE

from rpent.eval.command import _overrides, add_eval_parser
from rpent.eval.records import claim_sweep_folder
from rpent.eval.schedule import check_episodes
from rpent.eval.sweep import SweepError, load_sweep, parse_id_list, parse_sweep

LIBERO_RECIPES = "robots/libero/recipes/{suite}_task{task}_pick_place.jsonl"


def eval_args(*argv: str):
    import argparse

    parser = argparse.ArgumentParser()
    add_eval_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["eval", *argv])


def test_episodes_are_the_product_of_the_swept_axes_and_repeats_in_a_stable_order():
    sweep = parse_sweep({"robot": "libero", "suites": ["libero_object", "libero_spatial"], "tasks": [0, 3],
                         "init_states": [1], "repeats": 2, "recipe": LIBERO_RECIPES})
    ids = [e.id for e in sweep.episodes()]
    assert len(ids) == 2 * 2 * 1 * 2 == len(set(ids))
    assert ids[:3] == ["libero_object-task00-init01-rep0", "libero_object-task00-init01-rep1",
                       "libero_object-task03-init01-rep0"]
    assert sweep.recipe_for(sweep.episodes()[2]).name == "libero_object_task3_pick_place.jsonl"


@pytest.mark.parametrize(("data", "message"), [
    ({"robot": "toy", "planner": "replay"}, "recipe: required with planner replay"),
    ({"robot": "toy", "recipe": TOY_RECIPE, "repeats": 0}, "repeats: must be >= 1, got 0"),
    ({"robot": "toy", "recipe": TOY_RECIPE, "tasks": [1, 1]}, "tasks: must not repeat a value"),
    ({"robot": "toy", "recipe": TOY_RECIPE, "seeds": [-1]}, "seeds: must be integers >= 0"),
    ({"robot": "toy", "recipe": "r/{suite}_{colour}.jsonl"}, "recipe: unknown placeholder(s) ['colour']"),
    ({"robot": "toy", "recipe": TOY_RECIPE, "planner": "gpt"}, "planner: must be one of api, claude_code, codex, replay"),
    ({"robot": "toy", "recipe": TOY_RECIPE, "repeat": 2}, "repeat: unknown field"),
    ({"robot": "franka", "planner": "api", "sim_hosts": "10.0.0.5"}, "sim_hosts: 10.0.0.5 is not a loopback address"),
    ({"robot": "franka", "planner": "api", "concurrency": 3, "sim_hosts": "127.0.0.140-141"},
     "sim_hosts: 2 addresses cannot give each of 3 concurrent episodes one of its own"),
    ({"robot": "toy", "recipe": TOY_RECIPE, "token_budget": 0}, "token_budget: must be >= 1, got 0"),
])
def test_a_bad_sweep_is_refused_naming_the_field_and_the_rule(data, message):
    with pytest.raises(SweepError) as refused:
        parse_sweep(data)
    assert str(refused.value).startswith(message), str(refused.value)


def test_flags_override_the_yaml_file_and_id_ranges_expand(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(f"robot: toy\nrecipe: {TOY_RECIPE}\nrepeats: 3\nconcurrency: 1\n")
    args = eval_args("--sweep", str(path), "--repeats", "2", "--out", str(tmp_path / "out"))
    sweep = load_sweep(args.sweep, _overrides(args))
    assert (sweep.robot, sweep.repeats, sweep.concurrency) == ("toy", 2, 1)
    assert parse_id_list("0-3,7", "--tasks") == [0, 1, 2, 3, 7]
    with pytest.raises(SweepError, match=r"^--tasks: expected ids like 0-9"):
        parse_id_list("0..3", "--tasks")
    with pytest.raises(SweepError, match=r"^--sweep: .* must hold a mapping"):
        (tmp_path / "list.yaml").write_text("- robot\n")
        load_sweep(tmp_path / "list.yaml", {})


def test_a_swept_axis_the_robot_has_no_flag_for_is_refused_before_anything_runs(tmp_path):
    sweep = parse_sweep({"robot": "toy", "recipe": TOY_RECIPE, "tasks": [0, 1]})
    with pytest.raises(SweepError, match=r"^tasks: robot toy has no --task-id flag"):
        check_episodes(sweep, tmp_path)


def test_a_missing_recipe_is_refused_naming_the_episode(tmp_path):
    sweep = parse_sweep({"robot": "toy", "recipe": str(tmp_path / "rep{repeat}.jsonl"), "repeats": 2})
    (tmp_path / "rep0.jsonl").write_text(Path(TOY_RECIPE).read_text())
    with pytest.raises(SweepError, match=r"^recipe: no file .*rep1.jsonl for episode toy-rep1"):
        check_episodes(sweep, tmp_path)


def test_a_sweep_folder_takes_only_its_own_sweep_back(tmp_path):
    out = tmp_path / "out"
    sweep = parse_sweep({"robot": "toy", "recipe": TOY_RECIPE, "repeats": 2})
    claim_sweep_folder(out, sweep)
    assert json.loads((out / "sweep.json").read_text())["episodes"] == ["toy-rep0", "toy-rep1"]
    claim_sweep_folder(out, sweep.model_copy(update={"retries": 5, "concurrency": 1}))  # a resume may change these
    with pytest.raises(SweepError, match=r"^--out: .* holds another sweep \(max_turns, repeats differ\)"):
        claim_sweep_folder(out, sweep.model_copy(update={"repeats": 3, "max_turns": 5}))
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(SweepError, match=r"^--out: .* is not empty and holds no sweep.json"):
        claim_sweep_folder(tmp_path / "other", sweep)


def test_each_axis_becomes_the_robots_own_flag(tmp_path):
    from rpent.eval.episode import run_args

    libero = parse_sweep({"robot": "libero", "suites": ["libero_spatial"], "tasks": [3], "init_states": [7],
                          "seeds": [5], "recipe": TOY_RECIPE, "robot_args": ["--camera-size", "128"]})
    args, _, _ = run_args(libero, libero.episodes()[0], tmp_path)
    assert (args.suite, args.task_id, args.init_state, args.seed, args.camera_size) == ("libero_spatial", 3, 7, 5, 128)
    assert args.output_dir == str(tmp_path / "libero_spatial-task03-init07-seed5-rep0")
    assert args.memory_dir == str(tmp_path / "_memory" / "libero_spatial-task03-init07-seed5-rep0")
    franka = parse_sweep({"robot": "franka", "seeds": [4], "planner": "api", "concurrency": 1})
    args, _, _ = run_args(franka, franka.episodes()[0], tmp_path)
    assert (args.sim, args.sim_seed, args.planner) == (True, 4, "api")  # a seeded scene is a simulated one
