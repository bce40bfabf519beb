"""The main job: `rpent run --robot franka --sim --planner replay --recipe <bundled pick>`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from robots.franka.toolkit import SIM_IMAGE_ORDER
from rpent.cli.main import main
from rpent.record.steps import read_steps
from rpent.tools.images import decode_png

ROOT = Path(__file__).resolve().parents[2]
PICK = ROOT / "robots" / "franka" / "recipes" / "pick_cube.jsonl"


BUSY_LOOP = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass"


@pytest.fixture(scope="module")
def picks_under_load(tmp_path_factory) -> list[tuple[Path, subprocess.CompletedProcess]]:
    """The bundled pick, run twice at once beside two busy loops (four processes that want a core, on a
    2-core machine): the simulator keeps time with its clients, so load makes a run slower, not different."""
    base = tmp_path_factory.mktemp("picks")
    busy = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(2)]
    try:
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "rpent", "run", "--robot", "franka", "--sim", "--planner", "replay",
                 "--recipe", str(PICK), "--output-dir", str(base / f"run{i}"), "--quiet",
                 "--memory-dir", str(base / f"memory{i}")],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=base,
            )
            for i in range(2)
        ]
        done = []
        for i, run in enumerate(runs):
            stdout, stderr = run.communicate(timeout=400)
            done.append((base / f"run{i}", subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr)))
        return done
    finally:
        for process in busy:
            process.kill()
            process.wait(10)


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_two_picks_beside_busy_loops_both_lift_the_cube_and_plan_no_motion_again(picks_under_load):
    for out, done in picks_under_load:
        assert done.returncode == 0, done.stderr
        assert json.loads((out / "result.json").read_text())["solved"] is True
        log = (out / "run.log").read_text()
        assert "planning the same target again" not in log
        assert "motions planned again after franky's trajectory generator gave up: 0" in log
        assert "the simulation ran on without it: 0" in log


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_bundled_pick_recipe_lifts_the_cube_and_films_and_names_every_camera(picks_under_load):
    out, done = picks_under_load[0]
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "finished" and result["finish_status"] == "success"
    assert result["solved"] is True  # ground truth from the simulator: the cube is off the table
    scene = result["scene"]  # the fixed scene's ground truth: the cube went up by the recipe's lift
    assert scene["seed"] is None
    assert scene["end"]["cube"]["xyz_m"][2] > scene["start"]["cube"]["xyz_m"][2] + 0.05
    steps = read_steps(out / "steps.jsonl")
    assert [s["tool"] for s in steps] == [json.loads(line)["tool"] for line in PICK.read_text().splitlines()]
    assert (out / "recipe_franka.jsonl").exists()

    # Every observation's images are named by camera: 00005_grasp_front.png, in steps.jsonl, on disk,
    # and the depth saved beside them under the same names.
    moves = [s for s in steps if s["tool"] != "finish"]
    for step in moves:
        expected = [f"{step['call_id']:05d}_{step['tool']}_{camera}.png" for camera in SIM_IMAGE_ORDER]
        assert step["images"] == expected, step
        assert all((out / "images" / name).is_file() for name in expected)
        assert sorted(p.name for p in (out / "depth").glob(f"{step['call_id']:05d}_*")) == sorted(
            name.replace(".png", ".npz") for name in expected)
    transcript = (out / "transcript.json").read_text()
    assert str(out / "images" / f"{moves[-1]['call_id']:05d}_{moves[-1]['tool']}_wrist.png") in transcript

    # episode.mp4 shows every camera: a 2 x 2 grid of the 320 x 240 views, each labelled with its name.
    with av.open(str(out / "episode.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) >= 5 and frames[0].shape == (480, 640, 3)
    last = moves[-1]
    views = {c: decode_png((out / "images" / f"{last['call_id']:05d}_{last['tool']}_{c}.png").read_bytes())
             for c in SIM_IMAGE_ORDER}
    tiles = {c: frames[-1][(i // 2) * 240 : (i // 2 + 1) * 240, (i % 2) * 320 : (i % 2 + 1) * 320]
             for i, c in enumerate(SIM_IMAGE_ORDER)}
    for camera, tile in tiles.items():
        # Below the label, each tile is nearest to its own camera's picture of the same moment.
        distance = {other: float(np.abs(tile[40:].astype(int) - view[40:].astype(int)).mean())
                    for other, view in views.items()}
        assert min(distance, key=distance.get) == camera, (camera, distance)
        label = tile[:18, :30]
        assert (label.min(axis=2) > 200).any() and (label.max(axis=2) < 40).mean() > 0.5, camera  # white on black
    assert frames[-1][240:, 320:].mean() < 8  # the fourth tile: no camera (black, but for H.264)


def test_missing_config_file_is_a_config_error(tmp_path, capsys):
    code = main(["run", "--robot", "franka", "--sim", "--planner", "replay", "--recipe", str(PICK),
                 "--output-dir", str(tmp_path / "r"), "--config", str(tmp_path / "nope.yaml")])
    assert code == 2
    assert "--config: no such file" in capsys.readouterr().err


def test_video_fps_is_validated(tmp_path, capsys):
    code = main(["run", "--robot", "franka", "--sim", "--planner", "replay", "--recipe", str(PICK),
                 "--output-dir", str(tmp_path / "r"), "--video-fps", "100"])
    assert code == 2
    assert "--video-fps: must be between 0 and 30" in capsys.readouterr().err
