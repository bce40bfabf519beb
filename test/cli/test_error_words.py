"""Refusals in the house's words, one line each (README: "Problems print one line on the terminal"):
`<flag>: <rule>, got <value>`, whoever checked the value (argparse, pydantic, the runner)."""

from __future__ import annotations

import pytest

from .cli_support import REPO, rpent

TOY_RECIPE = str(REPO / "robots/toy/recipes/red_block_in_bin.jsonl")


def _one_line(done) -> str:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # no usage block before it
    assert "usage:" not in done.stderr and "Input should be" not in done.stderr
    return lines[0]


@pytest.mark.parametrize(("value", "line"), [
    ("0", "rpent: error: --repeats: must be >= 1, got 0"),
    ("abc", "rpent eval: error: --repeats: must be a whole number, got 'abc'"),
])
def test_eval_repeats_is_refused_in_the_house_words(tmp_path, value, line):
    done = rpent("eval", "--robot", "toy", "--recipe", TOY_RECIPE, "--repeats", value, "--out", str(tmp_path / "e"))
    assert _one_line(done) == line
    assert not (tmp_path / "e").exists()


def test_a_max_turns_of_0_reads_the_same_way_as_before(tmp_path):
    done = rpent("run", "--robot", "toy", "--recipe", TOY_RECIPE, "--max-turns", "0", "--output-dir", str(tmp_path / "r"))
    assert _one_line(done) == "rpent: error: --max-turns: must be >= 1, got 0"


@pytest.mark.parametrize(("flags", "line"), [
    (["--robot", "franka", "--sim", "--sim-seed", "abc"], "rpent run: error: --sim-seed: must be a whole number, got 'abc'"),
    (["--robot", "toy", "--max-wall-time", "soon"], "rpent run: error: --max-wall-time: must be a number, got 'soon'"),
    (["--robot", "toy", "--memory-access", "all"],
     "rpent run: error: --memory-access: must be one of read-only, read-write, inbox-write, got 'all'"),
])
def test_a_bad_flag_value_is_one_line_naming_the_flag(tmp_path, flags, line):
    done = rpent("run", *flags, "--recipe", TOY_RECIPE, "--output-dir", str(tmp_path / "r"))
    assert _one_line(done) == line


def test_a_misspelled_flag_still_shows_the_usage_it_was_meant_for():
    done = rpent("run", "--robot", "toy", "--planer", "replay")
    assert done.returncode == 2 and done.stderr.startswith("usage: rpent run ")


def test_replay_without_a_recipe_names_the_bundled_ones(tmp_path):
    done = rpent("run", "--robot", "toy", "--output-dir", str(tmp_path / "r"))
    assert _one_line(done) == ("rpent: error: --recipe: required with --planner replay; toy's bundled recipes: "
                               "robots/toy/recipes/red_block_in_bin.jsonl")
    assert not (tmp_path / "r").exists()


def test_a_used_output_dir_suggests_resume_only_for_a_run_record(tmp_path):
    record = tmp_path / "record"
    assert rpent("run", "--robot", "toy", "--recipe", TOY_RECIPE, "--output-dir", str(record),
                 "--memory-dir", str(tmp_path / "memory")).returncode in (0, 1)
    again = _one_line(rpent("run", "--robot", "toy", "--recipe", TOY_RECIPE, "--output-dir", str(record)))
    assert again == (f"rpent: error: --output-dir: {record} is not empty: it holds a run record; each run needs a new or empty "
                     f"directory (pass --resume to continue that record as a new segment)")

    folder = tmp_path / "papers"
    (folder / "drafts").mkdir(parents=True)
    (folder / "notes.txt").write_text("mine\n")
    other = _one_line(rpent("run", "--robot", "toy", "--recipe", TOY_RECIPE, "--output-dir", str(folder)))
    assert other == (f"rpent: error: --output-dir: {folder} is not empty and not a run record (it holds drafts/, "
                     f"notes.txt); each run needs a new or empty directory")
    assert "--resume" not in other
    assert sorted(p.name for p in folder.iterdir()) == ["drafts", "notes.txt"]
