"""franka_sim_node's `sim_seed`: the same random scene `rpent run --sim --sim-seed N` simulates in
process (objects placed within each arm's envelope from its home pose), in the simulator itself.

Skipped where rclpy, the generated rpent interfaces or franky-sim cannot be imported.
"""

from __future__ import annotations

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy", reason="rclpy not importable: ROS 2 is not sourced")
pytest.importorskip("rpent.action", reason="rpent interfaces not generated: colcon build this package and source it")
pytest.importorskip("franky_sim", reason="franky-sim is not installed (pip install rpent[sim])")

from rclpy.parameter import Parameter  # noqa: E402
from sim_process import free_sim_hosts  # noqa: E402

from robots.franka.config import CONFIG_DIR, HOME_JOINTS_RAD, load_franka_config  # noqa: E402
from robots.franka.ros.sim_node import FrankaSimNode  # noqa: E402
from robots.franka.sim.scene_layout import random_scene  # noqa: E402
from robots.franka.sim.simulator import SimScene  # noqa: E402
from rpent.robot import ConfigError  # noqa: E402

pytestmark = [pytest.mark.ros, pytest.mark.slow, pytest.mark.timeout(120)]


def _in_process_scene(config: str, seed: int, base: SimScene) -> SimScene:
    """The scene robots.franka.runtime.build_runtime makes for `--sim --sim-seed seed` with `config`."""
    franka = load_franka_config(CONFIG_DIR / config)
    envelopes = [franka.safety().envelope(a.name, p) for a, p in zip(franka.arms, base.arm_positions, strict=True)]
    return random_scene(seed, base, envelopes, [HOME_JOINTS_RAD] * len(envelopes), 4 / 3)


@pytest.mark.parametrize(("arms", "config", "base"), [(1, "franka.yaml", SimScene()), (2, "franka_dual.yaml", SimScene.dual())])
def test_sim_seed_simulates_the_random_scene_rpent_run_would(ros, arms, config, base):
    node = ros(FrankaSimNode(parameter_overrides=[
        Parameter("arms", value=arms), Parameter("hosts", value=free_sim_hosts(236, 240, arms)), Parameter("sim_seed", value=6),
        Parameter("camera_width", value=64), Parameter("camera_height", value=48),
    ]))
    expected = _in_process_scene(config, 6, base)
    placed = {o.name: o.position for o in expected.objects}
    assert {o.name for o in node.sim.scene.objects} == set(placed)
    for obj in base.objects:  # a random scene, not the fixed one
        assert not np.allclose(placed[obj.name], obj.position, atol=0.005), obj.name
    for name, position in placed.items():  # where the simulator has each body, settled on the table
        xyz, _quat = node.sim.body_pose(name)
        assert np.allclose(xyz[:2], position[:2], atol=0.003), name


def test_a_negative_sim_seed_is_refused_before_the_simulator_starts(ros):
    with pytest.raises(ConfigError, match=r"^parameter sim_seed: must be an integer from 0 to 2147483647, got -1$"):
        FrankaSimNode(parameter_overrides=[Parameter("sim_seed", value=-1), Parameter("hosts", value=["127.0.0.1"])])
