"""Sweeps on Ray: a local loopback instance, a head started here with `ray start`, crashes and resumes.

Ray starts are few (one local instance per local test, one head for the module); every Ray process
these tests start is stopped by its id, and each instance has its own temp dir.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from eval_helpers import REPO, TOY_RECIPE, descendants, short_temp_dir, wait_until

from rpent.eval.progress import Progress
from rpent.eval.records import ATTEMPTS_DIR, is_complete
from rpent.eval.results import summarise
from rpent.eval.schedule import run_sweep
from rpent.eval.sweep import parse_sweep

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
RUN_RECORD = ("result.json", "steps.jsonl", "transcript.json", "run.log", "segments.jsonl", "episode.mp4")
RAY_PROCESS = re.compile(r"raylet|gcs_server|ray::")


def toy_sweep(**fields):
    return parse_sweep({"robot": "toy", "recipe": TOY_RECIPE, "repeats": 4, "concurrency": 2,
                        "memory_per_episode_mb": 256, **fields})


def segment_of(record: Path) -> dict:
    lines = [json.loads(line) for line in (record / "segments.jsonl").read_text().splitlines()]
    return lines[0] | {"segments": len({entry["segment"] for entry in lines})}


def listening_sockets() -> list[tuple[str, int]]:
    """(local address, pid) of every listening TCP socket, from `ss -ltnpH`."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=30, check=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        for pid in re.findall(r"pid=(\d+)", line):
            found.append((fields[3], int(pid)))
    return found


def is_loopback(local: str) -> bool:
    host = local.rsplit(":", 1)[0].strip("[]")
    return host.startswith("127.") or host.startswith("::ffff:127.") or host == "::1"


class WatchingProgress(Progress):
    """Looks at the machine while two episodes run: who listens where."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sockets_while_busy: list[tuple[str, int]] | None = None
        self.busy_pids: set[int] = set()

    def show(self) -> None:
        super().show()
        if self.running == 2 and self.sockets_while_busy is None:
            self.busy_pids = {os.getpid(), *descendants(os.getpid())}
            self.sockets_while_busy = listening_sockets()


def test_a_toy_sweep_on_a_local_ray_runs_each_episode_as_an_ordinary_run_two_at_a_time(tmp_path, worker_env):
    out = tmp_path / "sweep"
    sweep = toy_sweep()
    progress = WatchingProgress(4)
    outcome = run_sweep(sweep, out, num_cpus=2, progress=progress, ray_temp_dir=short_temp_dir("rl-"))
    assert sorted(outcome.ran) == [f"toy-rep{i}" for i in range(4)] and not outcome.failed

    records = [out / f"toy-rep{i}" for i in range(4)]
    for record in records:
        assert all((record / name).is_file() for name in RUN_RECORD), sorted(p.name for p in record.iterdir())
        result = json.loads((record / "result.json").read_text())
        assert (result["status"], result["finish_status"], result["solved"]) == ("finished", "success", True)
    # Each episode in a worker of its own, and two of them at the same time.
    segments = [segment_of(r) | {"wall": json.loads((r / "result.json").read_text())["wall_time_s"]} for r in records]
    assert len({s["pid"] for s in segments}) == 4
    intervals = sorted((s["claimed_at"], s["claimed_at"] + s["wall"]) for s in segments)
    assert any(b[0] < a[1] for a, b in itertools.pairwise(intervals)), intervals

    # While episodes ran, nothing of this Ray listened beyond loopback (127.0.0.0/8).
    assert progress.sockets_while_busy is not None
    ours = [(local, pid) for local, pid in progress.sockets_while_busy if pid in progress.busy_pids]
    assert ours, "no Ray process was listening at all: the check saw nothing"
    assert [s for s in ours if not is_loopback(s[0])] == []

    # The local instance is stopped at the end.
    def ray_children():
        return [p for p in descendants(os.getpid()) if RAY_PROCESS.search(_name(p))]
    wait_until(lambda: not ray_children(), 60, "the local Ray's processes to exit")

    rows = summarise(out)["episodes"]
    assert [(r["id"], r["solved"], r["attempts"]) for r in rows] == [(f"toy-rep{i}", True, 1) for i in range(4)]


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.timeout(1500)
def test_a_libero_replay_sweep_of_two_suites_runs_two_at_a_time_on_a_local_ray(tmp_path, worker_env):
    pytest.importorskip("libero")
    out = tmp_path / "libero"
    # Two episodes, one per suite, at once: the sweep's concurrency (test_results covers init states).
    sweep = parse_sweep({
        "robot": "libero", "suites": ["libero_object", "libero_spatial"], "tasks": [0], "init_states": [0],
        "recipe": str(REPO / "robots/libero/recipes/{suite}_task{task}_pick_place.jsonl"), "concurrency": 2,
        "memory_per_episode_mb": 2048, "robot_args": ["--camera-size", "128"],
    })
    outcome = run_sweep(sweep, out, num_cpus=2, ray_temp_dir=short_temp_dir("rl-"))
    assert len(outcome.ran) == 2 and not outcome.failed, outcome
    results = summarise(out)
    assert [(r["suite"], r["init_state"], r["finish_status"]) for r in results["episodes"]] == [
        ("libero_object", 0, "success"), ("libero_spatial", 0, "success")]
    for row in results["episodes"]:
        assert row["solved"] is True and row["turns"] > 0 and row["wall_time_s"] > 0
        assert (Path(row["record"]) / "episode.mp4").stat().st_size > 0
    assert [r["episodes"] for r in results["per_suite"]] == [1, 1]


def test_a_sweep_runs_on_a_ray_head_started_with_ray_start(tmp_path, ray_head):
    head_pids = {ray_head.pid, *descendants(ray_head.pid)}
    heads_sockets = [local for local, pid in listening_sockets() if pid in head_pids]
    assert heads_sockets and all(is_loopback(local) for local in heads_sockets), heads_sockets
    out = tmp_path / "sweep"
    outcome = run_sweep(toy_sweep(), out, ray_address=ray_head.address)
    assert len(outcome.ran) == 4 and not outcome.failed
    for i in range(4):
        record = out / f"toy-rep{i}"
        assert json.loads((record / "result.json").read_text())["solved"] is True
        # A worker of the head ran it (its log files carry its pid), not a Ray of this process.
        assert list(ray_head.temp_dir.glob(f"session_*/logs/worker-*-{segment_of(record)['pid']}.*"))


def test_a_worker_killed_mid_episode_is_retried_and_its_partial_record_and_servers_cleared(tmp_path, ray_head):
    gate = tmp_path / "gate"
    gate.mkdir()
    out = tmp_path / "sweep"
    sweep = toy_sweep(repeats=1, concurrency=1, retries=1, planner="eval_plugins:GatedReplayPlanner", recipe=None,
                      planner_options={"recipe": TOY_RECIPE, "gate_dir": str(gate), "spawn_server": True})
    finished = threading.Event()
    outcome = {}

    def drive():
        try:
            outcome["value"] = run_sweep(sweep, out, ray_address=ray_head.address)
        finally:
            finished.set()

    threading.Thread(target=drive, daemon=True).start()
    started = wait_until(lambda: sorted(gate.glob("started-*")), 120, "the episode to start")
    os.kill(int(started[0].read_text()), signal.SIGKILL)
    (gate / "open").write_text("")
    assert finished.wait(300), "the sweep did not end"
    assert outcome["value"].ran == ["toy-rep0"] and not outcome["value"].failed
    record = out / "toy-rep0"
    assert json.loads((record / "result.json").read_text())["solved"] is True
    (attempt,) = (out / ATTEMPTS_DIR).iterdir()
    assert attempt.name == "toy-rep0-1" and not is_complete(attempt)
    assert segment_of(attempt)["pid"] == int(started[0].read_text())
    (row,) = summarise(out)["episodes"]
    assert (row["status"], row["solved"], row["attempts"]) == ("finished", True, 2)
    # The server the killed attempt had started did not outlive it; the retry's own was stopped by its run.
    servers = [int(p.read_text()) for p in gate.glob("server-*")]
    try:
        assert len(servers) == 2
        wait_until(lambda: all(_state(pid) == "Z" for pid in servers), 60, "the episodes' servers to exit")
    finally:
        for pid in servers:
            if _state(pid) != "Z":
                os.kill(pid, signal.SIGKILL)


def test_a_sweep_resumes_after_its_driver_is_killed_skipping_complete_episodes(tmp_path, ray_head):
    out = tmp_path / "sweep"
    ray_dir = short_temp_dir("rk-")
    driver = subprocess.Popen(
        [sys.executable, "-m", "rpent", "eval", "--robot", "toy", "--recipe", TOY_RECIPE, "--repeats", "4",
         "--concurrency", "1", "--memory-per-episode-mb", "256", "--num-cpus", "2", "--ray-temp-dir", str(ray_dir),
         "--out", str(out)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    started_by_driver: set[int] = set()
    try:
        def halfway():  # one episode complete and the next one under way
            started_by_driver.update(descendants(driver.pid))
            records = sorted(out.glob("toy-rep*"))
            complete = [p for p in records if is_complete(p)]
            running = [p for p in records if not is_complete(p) and (p / "segments.jsonl").exists()]
            return complete if complete and running else None
        done_before = wait_until(halfway, 240, "one episode complete and the next one running", interval_s=0.05)
        started_by_driver.update(descendants(driver.pid))
        driver.kill()
        driver.wait(timeout=30)
    finally:
        _stop(driver, started_by_driver)
    before = {p.name: (p / "result.json").read_bytes() for p in done_before}
    partial = [p.name for p in out.glob("toy-rep*") if not is_complete(p)]
    assert partial and len(before) < 4, "the driver was not killed halfway"

    outcome = run_sweep(toy_sweep(concurrency=1), out, ray_address=ray_head.address)
    assert sorted(outcome.skipped_complete) == sorted(before)
    assert sorted(outcome.ran) == sorted({f"toy-rep{i}" for i in range(4)} - set(before))
    for name, result in before.items():  # complete episodes were left exactly as they were
        assert (out / name / "result.json").read_bytes() == result and segment_of(out / name)["segments"] == 1
    assert sorted(p.name.rsplit("-", 1)[0] for p in (out / ATTEMPTS_DIR).glob("*")) == sorted(partial)
    rows = summarise(out)["episodes"]
    assert all(r["status"] == "finished" and r["solved"] for r in rows)


def _stop(driver: subprocess.Popen, pids: set[int]) -> None:
    """Stop the killed driver's Ray (its gcs_server, raylet, workers) by their ids, with a bounded wait."""
    if driver.poll() is None:
        driver.kill()
        driver.wait(timeout=30)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    wait_until(lambda: not [p for p in pids if Path(f"/proc/{p}").exists() and _state(p) != "Z"], 60,
               "the killed driver's Ray processes to exit")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def test_no_new_episode_starts_once_the_sweeps_token_budget_is_spent(tmp_path, ray_head):
    out = tmp_path / "sweep"
    sweep = toy_sweep(concurrency=1, token_budget=1500, planner="eval_plugins:TokenSpendingReplayPlanner",
                      recipe=None, planner_options={"tokens_per_episode": 1000})
    outcome = run_sweep(sweep, out, ray_address=ray_head.address)
    # One at a time: after two episodes (2000 tokens) the budget of 1500 is spent.
    assert (outcome.ran, outcome.not_run, outcome.tokens_used) == (["toy-rep0", "toy-rep1"], ["toy-rep2", "toy-rep3"],
                                                                     2000)
    results = summarise(out)
    assert [r["status"] for r in results["episodes"]] == ["finished", "finished", "not_run", "not_run"]
    assert results["tokens"] == 2000 and results["per_task"][0]["episodes"] == 2
    # A resume counts the tokens already spent: nothing more starts.
    again = run_sweep(sweep, out, ray_address=ray_head.address)
    assert (again.ran, again.not_run, again.tokens_used) == ([], ["toy-rep2", "toy-rep3"], 2000)
