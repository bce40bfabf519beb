"""The main job: `rpent run --robot franka --sim --planner replay --recipe <bundled pick>`."""

from __future__ import annotations

import json
from pathlib import Path

import av
import pytest

from rpent.cli.main import main
from rpent.tools.steps import read_steps

ROOT = Path(__file__).resolve().parents[2]
PICK = ROOT / "robots" / "franka" / "recipes" / "pick_cube.jsonl"


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_bundled_pick_recipe_lifts_the_cube_and_writes_a_playable_video(tmp_path):
    out = tmp_path / "run"
    code = main(["run", "--robot", "franka", "--sim", "--planner", "replay", "--recipe", str(PICK),
                 "--output-dir", str(out), "--quiet", "--memory-dir", str(tmp_path / "memory")])
    assert code == 0
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "finished" and result["finish_status"] == "success"
    assert result["solved"] is True  # ground truth from the simulator: the cube is off the table
    scene = result["scene"]  # the fixed scene's ground truth: the cube went up by the recipe's lift
    assert scene["seed"] is None
    assert scene["end"]["cube"]["xyz_m"][2] > scene["start"]["cube"]["xyz_m"][2] + 0.05
    tools = [s["tool"] for s in read_steps(out / "steps.jsonl")]
    assert tools == [json.loads(line)["tool"] for line in PICK.read_text().splitlines()]
    with av.open(str(out / "episode.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) >= 5 and frames[0].shape == (240, 320, 3)
    assert (out / "recipe_franka.jsonl").exists()


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
