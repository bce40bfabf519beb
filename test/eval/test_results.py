"""results.json, the Markdown table and the plot, from a sweep folder's records alone."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from eval_helpers import REPO, TOY_RECIPE
from PIL import Image

from rpent.eval.progress import Progress
from rpent.eval.records import claim_sweep_folder, write_failure
from rpent.eval.results import summarise, wilson_interval
from rpent.eval.sweep import parse_sweep


@pytest.mark.parametrize(("k", "n"), [(0, 10), (5, 10), (10, 10), (1, 3), (37, 40), (1, 1)])
def test_wilson_interval_matches_scipys(k, n):
    stats = pytest.importorskip("scipy.stats")
    reference = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert wilson_interval(k, n) == pytest.approx((reference.low, reference.high), abs=1e-9)


def write_record(out, episode_id, *, solved, tokens=0, turns=5, wall=2.0, status="finished"):
    record = out / episode_id
    record.mkdir()
    (record / "segments.jsonl").write_text('{"segment": 1}\n')
    (record / "result.json").write_text(json.dumps({
        "status": status, "finish_status": "success" if solved else "failure", "solved": solved, "turns": turns,
        "usage": {"total_tokens": tokens}, "wall_time_s": wall, "error": None,
    }))


@pytest.fixture
def folder(tmp_path):
    """A LIBERO-shaped sweep: task 0 solved 2/3, task 1 solved 0/2 with one crash, one never run."""
    out = tmp_path / "sweep"
    sweep = parse_sweep({"robot": "libero", "suites": ["libero_object"], "tasks": [0, 1], "init_states": [0, 1, 2],
                         "planner": "api"})
    claim_sweep_folder(out, sweep)
    write_record(out, "libero_object-task00-init00-rep0", solved=True, tokens=1000)
    write_record(out, "libero_object-task00-init01-rep0", solved=True, tokens=500)
    write_record(out, "libero_object-task00-init02-rep0", solved=False, tokens=700)
    write_record(out, "libero_object-task01-init00-rep0", solved=False, tokens=300)
    (out / "libero_object-task01-init01-rep0").mkdir()  # a worker died here and the retries ran out
    (out / "libero_object-task01-init01-rep0" / "run.log").write_text("partial")
    write_failure(out, parse_sweep(json.loads((out / "sweep.json").read_text())["sweep"]).episodes()[4],
                  "WorkerCrashedError after 3 attempt(s)")
    return out  # task01-init02 has no folder: the token budget ran out before it


def test_summary_has_a_row_per_planned_episode_and_rates_with_intervals(folder):
    results = summarise(folder)
    rows = {r["id"]: r for r in results["episodes"]}
    assert len(rows) == 6
    assert rows["libero_object-task00-init01-rep0"] | {"record": None} == rows["libero_object-task00-init01-rep0"] | {
        "record": None, "robot": "libero", "suite": "libero_object", "task": 0, "init_state": 1, "planner": "api",
        "repeat": 0, "finish_status": "success", "solved": True, "tokens": 500, "turns": 5, "attempts": 1}
    assert rows["libero_object-task01-init01-rep0"]["status"] == "crashed"
    assert rows["libero_object-task01-init01-rep0"]["error"].startswith("WorkerCrashedError")
    assert rows["libero_object-task01-init02-rep0"]["status"] == "not_run"
    per_task = {r["task"]: r for r in results["per_task"]}
    assert (per_task[0]["successes"], per_task[0]["episodes"]) == (2, 3)
    assert (per_task[1]["successes"], per_task[1]["episodes"]) == (0, 2)  # the crash counts, the unrun one not
    assert (per_task[0]["wilson95_low"], per_task[0]["wilson95_high"]) == pytest.approx(wilson_interval(2, 3), abs=1e-4)
    (suite,) = results["per_suite"]
    assert (suite["successes"], suite["episodes"]) == (2, 5)
    assert results["tokens"] == 2500
    assert json.loads((folder / "results.json").read_text()) == results


def test_the_table_carries_the_numbers_and_the_plot_is_a_png(folder):
    summarise(folder)
    table = (folder / "results.md").read_text()
    lo, hi = wilson_interval(2, 3)
    assert f"| libero_object task 0 | 2/3 | 67% | {lo:.0%}-{hi:.0%} |" in table
    lo, hi = wilson_interval(2, 5)
    assert f"| libero_object | 2/5 | 40% | {lo:.0%}-{hi:.0%} |" in table
    data = (folder / "success.png").read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(data)) as image:
        image.verify()
        assert image.format == "PNG" and image.size[0] >= 300 and image.size[1] >= 300


def test_rpent_eval_summarise_rebuilds_the_results_from_the_records(folder):
    done = subprocess.run([sys.executable, "-m", "rpent", "eval", "--summarise", str(folder)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr  # one episode crashed for good
    assert "| libero_object task 1 | 0/2 | 0% |" in done.stdout
    assert (folder / "success.png").is_file() and (folder / "results.json").is_file()


def test_rpent_eval_refuses_a_bad_sweep_with_exit_2_and_the_field(tmp_path):
    done = subprocess.run([sys.executable, "-m", "rpent", "eval", "--robot", "toy", "--recipe", TOY_RECIPE,
                           "--repeats", "0", "--out", str(tmp_path / "o")], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    assert "rpent: error: --repeats: must be >= 1, got 0" in done.stderr  # the flag, in the house's words
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_progress_reports_done_running_failed_success_and_an_eta_from_the_pace():
    now = [0.0]
    lines = io.StringIO()
    progress = Progress(10, already_done=2, already_solved=1, stream=lines, clock=lambda: now[0])
    progress.episode_started()
    progress.episode_started()
    now[0] = 60.0
    progress.episode_finished(solved=True)
    progress.episode_failed()
    # 2 episodes ended in this session in 60 s: the 6 left take 3 minutes at that pace.
    assert progress.line() == "[eval] 3/10 done, 0 running, 1 failed, success so far 2/3 (67%), ETA 3m00s"
