"""`rpent export lerobot` on franky-sim runs, loaded back with lerobot's own LeRobotDataset.

The runs are made as a lab makes them (`rpent run --robot franka --sim`, the record's stream at its
default 15 Hz); the datasets are read by lerobot 0.6.1 in a venv of its own (lerobot_venv: built from
PyPI on first use, then reused), with PyAV decoding its videos.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("franky_sim", reason="franky-sim is not installed (pip install rpent[sim])")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install rpent[dataset])")
pytest.importorskip("openpi_client", reason="openpi-client is not installed (scripts/setup.sh installs it)")

from fakes.droid_policies import Reversing
from fakes.openpi_server import ScriptedPolicyServer
from lerobot_venv import LoadRequest, load_datasets

from rpent.dataset.command import export_lerobot
from rpent.dataset.episodes import Episode, ExportError, load_episodes
from rpent.record.stream import read_stream

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
PICK = ROOT / "robots" / "franka" / "recipes" / "pick_cube.jsonl"
# The same pick, but the hand goes down 15 cm beside the cube: the grasp closes on nothing.
MISS = [
    {"tool": "home", "arguments": {"speed_factor": 0.3}},
    {"tool": "open_gripper", "arguments": {}},
    {"tool": "move_to", "arguments": {"x_m": 0.5, "y_m": 0.15, "z_m": 0.3, "roll_rad": 3.14159, "pitch_rad": 0.0,
                                      "yaw_rad": 0.0, "speed_factor": 0.3}},
    {"tool": "move_to", "arguments": {"x_m": 0.5, "y_m": 0.15, "z_m": 0.2275, "speed_factor": 0.2}},
    {"tool": "grasp", "arguments": {"width_m": 0.0, "force_n": 20.0}, "expect": {"grasped": False}},
    {"tool": "move_by", "arguments": {"dz_m": 0.1, "speed_factor": 0.2}},
    {"tool": "finish", "arguments": {"status": "failure", "summary": "The hand closed on nothing."}},
]
DUAL = [
    {"tool": "home", "arguments": {"speed_factor": 0.3}},
    {"tool": "move_by", "arguments": {"arm": "left", "dz_m": 0.05, "speed_factor": 0.3}},
    {"tool": "move_by", "arguments": {"arm": "right", "dz_m": 0.05, "speed_factor": 0.3}},
    {"tool": "finish", "arguments": {"status": "failure", "summary": "Both hands went up 5 cm; no cube was lifted."}},
]
POLICY = [
    {"tool": "home", "arguments": {"speed_factor": 0.3}},
    {"tool": "run_policy", "arguments": {"instruction": "turn the hand", "max_steps": 24}},
    {"tool": "finish", "arguments": {"status": "failure", "summary": "Turned the hand; no cube was lifted."}},
]


def write_recipe(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def start_run(robot: str, recipe: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rpent", "run", "--robot", robot, "--sim", "--planner", "replay", "--recipe",
         str(recipe), "--output-dir", str(out), "--quiet", "--memory-dir", str(out.parent / f"{out.name}-memory"),
         *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        # SIGINT at its default whatever this runner inherited (issue 31): the run can be stopped as a user would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def finish(process: subprocess.Popen, exit_code: int = 0, timeout: float = 240) -> None:
    try:
        _, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
    assert process.returncode == exit_code, err[-2000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A solved pick, a pick whose grasp closed on nothing, a dual-arm run and a policy run (two at a time), and a
    pick SIGKILLed mid-motion."""
    base = tmp_path_factory.mktemp("runs")
    out = {name: base / name for name in ("solved", "missed", "dual", "policy", "killed")}
    with ScriptedPolicyServer(Reversing(joint=6, units=0.4)) as server:
        solved = start_run("franka", PICK, out["solved"])
        missed = start_run("franka", write_recipe(base / "miss.jsonl", MISS), out["missed"])
        finish(solved)
        finish(missed, exit_code=1)  # the task failed
        second = [start_run("dual_franka", write_recipe(base / "dual.jsonl", DUAL), out["dual"]),
                  start_run("franka", write_recipe(base / "policy.jsonl", POLICY), out["policy"],
                            "--vla-endpoint", server.endpoint)]
        for process in second:
            finish(process, exit_code=1)  # no cube was lifted: the runs' tasks failed
    kill_mid_motion(out["killed"])
    return out


def kill_mid_motion(out: Path) -> None:
    """A pick SIGKILLed once the hand is on its way down to the cube (call 4), mid-motion."""
    process = start_run("franka", PICK, out)
    samples = out / "stream" / "samples.jsonl"
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            lines = samples.read_text().splitlines() if samples.exists() else []
            if any('"calls": [[4, "move_to"]]' in line for line in lines[-1:]):
                break
            assert process.poll() is None, process.stderr.read()[-2000:]
            time.sleep(0.05)
        else:
            raise AssertionError("the run never reached its second move_to")
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(30)
    (out / "lines_at_kill").write_text(str(len(samples.read_text().splitlines()) - 1))


@dataclass
class Exported:
    summary: dict
    episodes: list[Episode]
    probes: list[tuple[int, int]]
    loaded: dict = field(default_factory=dict)


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory) -> dict[str, Exported]:
    """Every dataset the tests read, exported, then loaded by lerobot in one process (one import of torch)."""
    base = tmp_path_factory.mktemp("datasets")
    made: dict[str, Exported] = {}

    def export(name: str, sources: list[str], probes, **options) -> None:
        folders = [runs[source] for source in sources]
        summary = export_lerobot([str(f) for f in folders], base / name, repo_id=f"lab/{name}", **options)
        episodes = load_episodes(folders)
        made[name] = Exported(summary, episodes, probes(episodes) if callable(probes) else probes)

    export("picks", ["solved", "missed"], lambda eps: [(0, len(eps[0]) // 2), (1, len(eps[1]) - 1)])
    export("droid", ["solved"], [(0, 10)], convention="droid")
    export("dual", ["dual"], [(0, 0)])
    export("policy", ["policy"], lambda eps: [(0, k) for k, s in enumerate(eps[0].samples)
                                              if eps[0].stream.samples[s]["arms"]["arm"]["action"]["source"] == "policy"],
           convention="droid")
    export("killed", ["killed"], lambda eps: [(0, len(eps[0]) - 1)])
    requests = [LoadRequest(base / name, f"lab/{name}", base / f"{name}.npz", e.probes) for name, e in made.items()]
    for (name, e), loaded in zip(made.items(), load_datasets(requests), strict=True):
        e.loaded = loaded
        e.loaded["pictures"] = np.load(base / f"{name}.npz") if (base / f"{name}.npz").exists() else {}
    return made


def recorded_frame(run: Path, camera: str, sample: int) -> np.ndarray:
    stream = read_stream(run)
    for index, picture in enumerate(stream.frames(camera)):
        if index == sample:
            return picture
    raise AssertionError(f"{run}: no sample {sample}")


def test_two_picks_export_and_load_with_lerobot_each_frame_the_recorded_one(runs, exported, tmp_path):
    picks = exported["picks"]
    summary, episodes, probes, loaded = picks.summary, picks.episodes, picks.probes, picks.loaded
    lengths = [len(e) for e in episodes]

    assert summary["episodes"] == loaded["num_episodes"] == 2
    assert summary["frames"] == loaded["total_frames"] == sum(lengths)
    assert loaded["codebase_version"] == "v3.0" and loaded["fps"] == 15 and loaded["robot_type"] == "franka"
    assert loaded["repo_id"] == "lab/picks"
    assert loaded["episode_lengths"] == {"0": lengths[0], "1": lengths[1]}
    # About 15 frames per second of the robot acting: each pick's motions last 5-10 s.
    assert all(40 < n < 200 for n in lengths), lengths
    features = loaded["features"]
    cameras = [f"observation.images.{c}" for c in ("front", "top", "wrist")]
    assert sorted(loaded["video_keys"]) == sorted(cameras)
    assert all(features[c]["shape"] == [240, 320, 3] and features[c]["dtype"] == "video" for c in cameras)
    for key, shape in {"observation.state": [8], "observation.velocity": [7], "observation.ee_pose": [7],
                       "action": [8], "call_id": [1]}.items():
        assert features[key]["shape"] == shape, key
    assert features["action"]["names"][:2] == ["arm.joint_1_velocity", "arm.joint_2_velocity"]
    episodes_meta = loaded["episodes"]
    assert episodes_meta["success"] == [True, False]
    assert episodes_meta["finish_status"] == ["success", "failure"]
    assert episodes_meta["run_id"] == ["solved", "missed"]
    assert loaded["tasks"] == {"Pick up the red cube and lift it 10 cm above the table.": 0}

    pictures = loaded["pictures"]
    for (episode_index, frame), episode in zip(probes, episodes, strict=True):
        sample = int(episode.samples[frame])
        for camera in ("front", "wrist"):
            decoded = pictures[f"{episode_index}_{frame}_observation.images.{camera}"].astype(int)
            recorded = recorded_frame(episode.run, camera, sample).astype(int)
            other = recorded_frame(episode.run, camera, 0 if sample > 20 else sample + 20).astype(int)
            # Two H.264 encodings apart (the record's, the dataset's): equal within a few levels, and much
            # closer to its own sample than to one a second and more away.
            error = np.abs(decoded - recorded).mean()
            assert error < 2.5, (episode_index, camera, error)
            assert error < np.abs(decoded - other).mean() / 2, (episode_index, camera)
        values = next(f["values"] for f in loaded["frames"] if f["episode_index"] == episode_index)
        measured = episode.stream.samples[sample]["arms"]["arm"]
        assert np.allclose(values["observation.state"][:7], measured["q"], atol=1e-6)
        assert values["observation.state"][7] == pytest.approx(measured["gripper_position"], abs=1e-6)
        assert values["call_id"] == episode.stream.samples[sample]["calls"][0][0]

    solved_only = export_lerobot([str(runs["solved"]), str(runs["missed"])], tmp_path / "solved", only_solved=True)
    assert solved_only["episodes"] == 1 and solved_only["frames"] == lengths[0]


def test_the_droid_convention_is_what_openpi_reads(exported):
    loaded = exported["droid"].loaded
    features = loaded["features"]
    for key in ("exterior_image_1_left", "exterior_image_2_left", "wrist_image_left"):
        assert features[key]["dtype"] == "video" and features[key]["shape"] == [180, 320, 3], key
    assert features["joint_position"]["shape"] == [7]
    assert features["gripper_position"]["shape"] == [1]
    assert features["actions"]["shape"] == [8]
    front = loaded["pictures"]["0_10_exterior_image_1_left"]
    # 320 x 240 scaled to 240 x 180 and padded: black bands of 40 px either side, never stretched.
    assert front[:, :38].max() < 10 and front[:, -38:].max() < 10 and front[:, 60:260].mean() > 30
    actions = np.asarray(loaded["frames"][0]["values"]["actions"])
    assert np.all(np.abs(actions[:7]) <= 1.0) and 0.0 <= actions[7] <= 1.0


def test_a_dual_arm_run_exports_both_arms_and_every_camera(runs, exported, tmp_path):
    loaded = exported["dual"].loaded
    features = loaded["features"]
    assert sorted(loaded["video_keys"]) == [f"observation.images.{c}" for c in
                                            ("front", "left_wrist", "right_wrist", "top")]
    assert features["observation.state"]["shape"] == [16]
    assert features["observation.state"]["names"][0] == "left.joint_1"
    assert features["observation.state"]["names"][8] == "right.joint_1"
    # Each arm's 5 cm rise is in its own arm's part of the frames.
    stream = read_stream(runs["dual"])
    rises = {}
    for arm in ("left", "right"):
        z = [s["arms"][arm]["ee"][2] for s in stream.samples]
        rises[arm] = max(z) - z[0]
    assert all(0.04 < rise < 0.06 for rise in rises.values()), rises
    with pytest.raises(ExportError, match=r"--convention droid: the run has 2 arms \(left, right\)"):
        export_lerobot([str(runs["dual"])], tmp_path / "nope", convention="droid")
    assert not (tmp_path / "nope").exists()


def test_a_policy_runs_actions_are_the_steps_the_arm_ran(runs, exported):
    policy = exported["policy"]
    episode, loaded = policy.episodes[0], policy.loaded
    policy_frames = [frame for _, frame in policy.probes]
    steps = json.loads((runs["policy"] / "steps.jsonl").read_text().splitlines()[1])
    ran = json.loads(steps["result"])["action_result"]["steps"]
    assert ran == 24
    sent = [episode.stream.samples[s]["arms"]["arm"]["action"]["joint_velocity"]
            for s in sorted(set(episode.samples[policy_frames].tolist()))]
    assert len(sent) == ran  # each step the arm ran is one sample of the stream, and a frame of the dataset
    actions = [np.asarray(f["values"]["actions"]) for f in loaded["frames"]]
    for action, frame in zip(actions, policy_frames, strict=True):
        velocity = episode.stream.samples[episode.samples[frame]]["arms"]["arm"]["action"]["joint_velocity"]
        # DROID's units: the velocity the arm was sent over 3 rad/s (0.2 rad per 15 Hz step).
        assert np.allclose(action[:7], np.asarray(velocity) / 3.0, atol=1e-6)
    # The policy asked 0.4 units on joint 7 and the arm was sent less (shaped to its velocity limit).
    assert 0.2 < max(abs(a[6]) for a in actions) < 0.4


def test_a_run_killed_mid_motion_still_exports_and_loads(runs, exported):
    killed = exported["killed"]
    lines_at_kill = int((runs["killed"] / "lines_at_kill").read_text())
    assert len(killed.episodes[0].stream.samples) >= lines_at_kill - 1  # at most the line being written is lost
    loaded = killed.loaded
    assert loaded["num_episodes"] == 1 and loaded["total_frames"] == killed.summary["frames"] > 10
    assert loaded["episodes"]["success"] == [None] and loaded["episodes"]["finish_status"] == [None]


def test_bad_input_is_one_line_naming_the_run_and_the_rule(runs, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "steps.jsonl").write_text("")
    cases = {
        (str(tmp_path / "absent"),): r"absent: not a run record \(no such folder\)$",
        (str(tmp_path),): r": not a run record \(none of segments.jsonl, steps.jsonl, result.json, run.log\)$",
        (str(bare),): r"bare: the record has no stream \(recorded with --record-hz 0",
        (str(runs["solved"]), str(runs["dual"])): r"dual: robot dual_franka, but .*solved has franka: one dataset",
    }
    for given, rule in cases.items():
        with pytest.raises(ExportError, match=rule) as caught:
            export_lerobot(list(given), tmp_path / "out")
        assert "\n" not in str(caught.value)
    with pytest.raises(ExportError, match=r"^--out: .* exists"):
        export_lerobot([str(runs["solved"])], bare)
    with pytest.raises(ExportError, match=r"^--only-solved: none of the runs solved its task$"):
        export_lerobot([str(runs["missed"])], tmp_path / "out", only_solved=True)
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]


def test_an_export_that_fails_half_way_leaves_nothing(runs, tmp_path, monkeypatch):
    import rpent.dataset.lerobot_v3 as writer

    def fail_after_the_data(root, *args, **kwargs):
        (root / "data").mkdir()
        (root / "data" / "half.parquet").write_bytes(b"PAR1")
        raise OSError("disk full")

    monkeypatch.setattr(writer, "write_dataset", fail_after_the_data)
    with pytest.raises(OSError, match="disk full"):
        export_lerobot([str(runs["solved"])], tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_command_line(runs, tmp_path):
    out = tmp_path / "cli"
    done = subprocess.run([sys.executable, "-m", "rpent", "export", "lerobot", str(runs["solved"]), "--out", str(out),
                           "--fps", "10"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("wrote 1 episodes, ") and " at 10 fps (rpent convention) to " in done.stdout
    assert done.stdout.splitlines()[1] == f"load it with LeRobotDataset('local/cli', root='{out}')"
    assert json.loads((out / "meta" / "info.json").read_text())["fps"] == 10
    # A quoted glob, and an eval sweep's folder (its episodes' records; not its _attempts/ or _failures/).
    sweep = tmp_path / "sweep"
    (sweep / "_attempts" / "picked-1").mkdir(parents=True)
    (sweep / "sweep.json").write_text("{}")
    for name in ("solved", "missed"):
        (sweep / name).symlink_to(runs[name])
    glob = subprocess.run([sys.executable, "-m", "rpent", "export", "lerobot", str(runs["solved"].parent / "s*ed"),
                           str(sweep), "--only-solved", "--out", str(tmp_path / "glob")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert glob.returncode == 0, glob.stderr
    assert glob.stdout.startswith("wrote 1 episodes, "), glob.stdout  # the solved run, named twice, once
    bad = subprocess.run([sys.executable, "-m", "rpent", "export", "lerobot", str(tmp_path / "none"), "--out",
                          str(tmp_path / "x")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [f"rpent export lerobot: error: {tmp_path / 'none'}: not a run record "
                                               "(no such folder)"]
