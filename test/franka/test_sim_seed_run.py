"""`rpent run ... --sim --sim-seed N`: the seeded scene is the one simulated, and result.json records
the ground truth of the scene (`scene`: seed, object poses at the start and at the end)."""

from __future__ import annotations

import json
import math

import pytest

from robots.franka.config import CONFIG_DIR, HOME_JOINTS_RAD, load_franka_config
from robots.franka.sim.scene_layout import random_scene
from robots.franka.sim.simulator import SimScene
from rpent.cli.main import main

# Objects are placed at rest on the table: by the time the task starts they have settled.
SETTLE_TOLERANCE_M = 0.003


def _run(tmp_path, robot: str, *extra: str) -> dict:
    recipe = tmp_path / "look.jsonl"
    recipe.write_text(json.dumps({"tool": "get_state", "arguments": {}}) + "\n")
    out = tmp_path / "run"
    main(["run", "--robot", robot, "--sim", *extra, "--planner", "replay", "--recipe", str(recipe),
          "--output-dir", str(out), "--quiet", "--memory-dir", str(tmp_path / "memory")])
    return json.loads((out / "result.json").read_text())


def _expected(robot: str, seed: int | None) -> SimScene:
    dual = robot == "dual_franka"
    franka = load_franka_config(CONFIG_DIR / ("franka_dual.yaml" if dual else "franka.yaml"))
    base = SimScene.dual() if dual else SimScene()
    if seed is None:
        return base
    envelopes = [franka.safety().envelope(a.name, p) for a, p in zip(franka.arms, base.arm_positions, strict=True)]
    return random_scene(seed, base, envelopes, [HOME_JOINTS_RAD] * len(envelopes), 4 / 3)


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.parametrize(("robot", "seed"), [("franka", 5), ("dual_franka", 5), ("franka", None)])
def test_result_records_where_each_object_of_the_simulated_scene_started_and_ended(tmp_path, robot, seed):
    result = _run(tmp_path, robot, *(["--sim-seed", str(seed)] if seed is not None else []))
    scene = result["scene"]
    assert scene["seed"] == seed
    expected = _expected(robot, seed)
    arms = ["left", "right"] if robot == "dual_franka" else ["arm"]
    assert set(scene["start"]) == set(scene["end"]) == {o.name for o in expected.objects}
    for obj in expected.objects:
        start, end = scene["start"][obj.name], scene["end"][obj.name]
        assert math.dist(start["xyz_m"], obj.position) < SETTLE_TOLERANCE_M, obj.name
        assert (start["yaw_deg"] - obj.yaw_deg + 180) % 360 - 180 == pytest.approx(0, abs=0.5)
        for arm, position in zip(arms, expected.arm_positions, strict=True):
            in_arm = [w - p for w, p in zip(start["xyz_m"], position, strict=True)]
            assert start["xyz_m_by_arm"][arm] == pytest.approx(in_arm, abs=1e-4)
        # Nothing touched the objects: they end where they started.
        assert math.dist(end["xyz_m"], start["xyz_m"]) < 1e-3


@pytest.mark.parametrize("robot", ["franka", "dual_franka"])
def test_sim_seed_without_sim_is_refused_before_anything_starts(tmp_path, capsys, robot):
    code = main(["run", "--robot", robot, "--sim-seed", "3", "--planner", "replay", "--recipe", "none.jsonl",
                 "--output-dir", str(tmp_path / "r")])
    assert code == 2
    assert "--sim-seed: only with --sim" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_a_negative_sim_seed_is_refused(tmp_path, capsys):
    code = main(["run", "--robot", "franka", "--sim", "--sim-seed", "-2", "--planner", "replay", "--recipe", "x.jsonl",
                 "--output-dir", str(tmp_path / "r")])
    assert code == 2
    assert "--sim-seed: must be an integer >= 0, got -2" in capsys.readouterr().err


def test_ros_parameter_sim_seed_reaches_the_run_config_with_the_cli_rules(tmp_path):
    # toolkit_node (and the dashboard/planner nodes) turn parameters into the robot's CLI flags.
    from robots.franka.robot_spec import FrankaSpec
    from rpent.robot import ConfigError
    from rpent_ros.params import namespace_from_params

    spec, out = FrankaSpec(), str(tmp_path / "r")

    def options(**params):
        return spec.parse_config(namespace_from_params(spec, {"sim": True, "output_dir": out, **params})).options

    assert options(sim_seed=4)["sim_seed"] == 4
    assert options()["sim_seed"] is None
    with pytest.raises(ConfigError, match="--sim-seed: must be an integer >= 0, got -1"):
        options(sim_seed=-1)
