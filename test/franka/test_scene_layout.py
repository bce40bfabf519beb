"""Random scenes (--sim-seed): deterministic per seed, every object graspable from above by an arm,
clear of the others and whole in every fixed camera's picture."""

from __future__ import annotations

import dataclasses
import math
from itertools import combinations

import numpy as np
import pytest

from robots.franka.config import CONFIG_DIR, HOME_JOINTS_RAD, load_franka_config
from robots.franka.safety import SafetyEnvelope
from robots.franka.safety_limits import Box
from robots.franka.sim.scene_layout import (
    EDGE_MARGIN_M,
    GRASP_CLEARANCE_M,
    SceneLayoutError,
    grasp_yaw_rad,
    random_scene,
)
from robots.franka.sim.simulator import SimScene
from rpent.runtime.arm import MotionRefused
from rpent.runtime.types import Pose

SAFETY = load_franka_config(CONFIG_DIR / "franka.yaml").safety()
SEEDS = range(1, 41)


def _setup(dual: bool):
    base = SimScene.dual() if dual else SimScene()
    names = ["left", "right"] if dual else ["arm"]
    envelopes = [SAFETY.envelope(name, pos) for name, pos in zip(names, base.arm_positions, strict=True)]
    return base, envelopes, [HOME_JOINTS_RAD] * len(names)


def _scene(seed: int, dual: bool = False) -> SimScene:
    return random_scene(seed, *_setup(dual))


def _arm_picks(scene: SimScene, envelopes, arm: int, obj) -> bool:
    """An independent replay of the pick through the envelope: home, above, grasp, lift."""
    x, y, z = np.subtract(obj.position, scene.arm_positions[arm])
    rpy = (math.pi, 0.0, grasp_yaw_rad(obj.yaw_deg))
    try:
        envelopes[arm].check_cartesian_motion(HOME_JOINTS_RAD, [
            Pose.from_rpy((x, y, z + 0.12), rpy), Pose.from_rpy((x, y, z), rpy), Pose.from_rpy((x, y, z + 0.12), rpy),
        ])
    except MotionRefused:
        return False
    return True


def test_a_seed_always_gives_the_same_scene_and_other_seeds_other_scenes():
    assert _scene(7) == _scene(7)
    layouts = {tuple((o.position, o.yaw_deg) for o in _scene(seed).objects) for seed in SEEDS}
    assert len(layouts) == len(SEEDS)


def test_a_random_scene_keeps_the_objects_arms_table_and_cameras_and_records_its_seed():
    fixed, scene = SimScene(), _scene(3)
    assert scene.seed == 3 and fixed.seed is None
    assert [(o.name, o.size_m, o.rgba, o.mass_kg) for o in scene.objects] == [
        (o.name, o.size_m, o.rgba, o.mass_kg) for o in fixed.objects
    ]
    assert dataclasses.replace(scene, objects=fixed.objects, seed=None) == fixed


@pytest.mark.parametrize("dual", [False, True], ids=["franka", "dual_franka"])
def test_every_object_rests_on_the_table_inside_a_workspace_with_margin_and_an_arm_picks_it_from_above(dual):
    base, envelopes, _ = _setup(dual)
    for seed in SEEDS:
        scene = _scene(seed, dual)
        for index, obj in enumerate(scene.objects):
            assert obj.position[2] == pytest.approx(scene.table_top_z + obj.size_m / 2)
            reach = obj.size_m / math.sqrt(2)
            for axis in (0, 1):
                centre, half = scene.table_center_xy[axis], scene.table_half_size_xy[axis]
                assert centre - half + reach < obj.position[axis] < centre + half - reach
            arms = [0] if index == 0 else range(len(base.arm_positions))  # the red cube: the first arm's
            inside = [
                arm for arm in arms
                if _inside_with_margin(envelopes[arm].limits.workspace_m, np.subtract(obj.position, base.arm_positions[arm]))
            ]
            assert any(_arm_picks(scene, envelopes, arm, obj) for arm in inside), (seed, obj)


def _inside_with_margin(box: Box, xyz: np.ndarray) -> bool:
    return all(lo + EDGE_MARGIN_M - 1e-9 <= v <= hi - EDGE_MARGIN_M + 1e-9 for v, (lo, hi) in zip(xyz[:2], (box.x, box.y), strict=True))


@pytest.mark.parametrize("dual", [False, True], ids=["franka", "dual_franka"])
def test_objects_stand_far_enough_apart_for_an_open_hand_between_them(dual):
    for seed in SEEDS:
        for a, b in combinations(_scene(seed, dual).objects, 2):
            assert math.dist(a.position[:2], b.position[:2]) >= GRASP_CLEARANCE_M, (seed, a.name, b.name)


def test_yaws_cover_every_turn_a_cube_can_have():
    # A cube repeats every 90 degrees: over the seeds every 15-degree slice of that quarter occurs.
    turns = [o.yaw_deg % 90 for seed in SEEDS for o in _scene(seed).objects]
    assert set(np.floor_divide(turns, 15).astype(int)) == set(range(6))
    assert min(o.yaw_deg for seed in SEEDS for o in _scene(seed).objects) < -90
    assert max(o.yaw_deg for seed in SEEDS for o in _scene(seed).objects) > 90


def test_grasp_yaw_turns_the_hand_at_most_45_degrees_to_close_across_the_cube():
    for yaw_deg in np.linspace(-180, 180, 73):
        hand = math.degrees(grasp_yaw_rad(float(yaw_deg)))
        assert -45 <= hand < 45
        assert (yaw_deg - hand) % 90 == pytest.approx(0, abs=1e-9) or (yaw_deg - hand) % 90 == pytest.approx(90)


def test_a_workspace_that_leaves_no_room_is_refused_naming_the_object():
    base, envelopes, homes = _setup(False)
    tight = SAFETY.default.model_copy(update={"workspace_m": Box(x=(0.45, 0.56), y=(-0.05, 0.05), z=(0.21, 0.65))})
    with pytest.raises(SceneLayoutError, match="'green_cube'"):
        random_scene(1, base, [SafetyEnvelope(tight, "arm")], homes)


@pytest.mark.parametrize("seed", [-1, 1.5, True, "3"])
def test_a_seed_that_is_not_a_whole_number_from_zero_is_refused(seed):
    with pytest.raises(ValueError, match="sim_seed: must be an integer >= 0"):
        random_scene(seed, *_setup(False))  # type: ignore[arg-type]


def test_a_place_the_envelope_would_refuse_to_approach_from_above_is_never_chosen():
    # Room on the table, but the workspace ends below the pre-grasp height: no pick passes.
    base, _, homes = _setup(False)
    low = SAFETY.default.model_copy(update={"workspace_m": Box(x=(0.30, 0.70), y=(-0.30, 0.30), z=(0.21, 0.30))})
    with pytest.raises(SceneLayoutError, match="no place for 'cube'"):
        random_scene(1, base, [SafetyEnvelope(low, "arm")], homes)
