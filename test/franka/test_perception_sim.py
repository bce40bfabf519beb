"""Depth, camera poses and back_project on franky-sim: the points are where MuJoCo has the objects.

Tolerances: a camera's reported pose within 1 mm / 0.1 deg of MuJoCo's; a back-projected cube pixel
on the cube's surface within 3 mm; the benchmark's bounds (median 5 mm, p90 10 mm) per camera.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from robots.franka.runtime import FrankaRuntime
from robots.franka.toolkit import SIM_IMAGE_ORDER, FrankaToolkit
from rpent.tools.images import decode_png

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_perception.py"


@pytest.fixture(scope="module")
def toolkit(sim_runtime: FrankaRuntime, tmp_path_factory) -> Iterator[FrankaToolkit]:
    kit = FrankaToolkit(robot=sim_runtime, output_dir=tmp_path_factory.mktemp("perception_run"))
    yield kit
    kit.close(timeout=30)


def _ok(result):
    assert result.error is None, result.error
    return result.data


def _red_pixel(png: bytes) -> tuple[int, int] | None:
    """The red pixel nearest the red blob's centroid (what a planner looking for the cube would pick)."""
    image = decode_png(png).astype(int)
    red = (image[..., 0] > 150) & (image[..., 1] < 70) & (image[..., 2] < 70)
    if red.sum() < 20:
        return None
    rows, cols = np.nonzero(red)
    nearest = int(np.argmin((rows - rows.mean()) ** 2 + (cols - cols.mean()) ** 2))
    return int(rows[nearest]), int(cols[nearest])


def _distance_outside_cube_mm(point: np.ndarray, centre: np.ndarray, half_m: float, rotation: np.ndarray) -> float:
    local = np.abs(rotation.T @ (point - centre))
    outside = np.maximum(local - half_m, 0.0)
    surface_gap = 0.0 if outside.any() else float(np.min(half_m - local))  # inside: distance to the nearest face
    return 1000 * (float(np.linalg.norm(outside)) + surface_gap)


def test_frames_give_depth_and_the_pose_mujoco_renders_from(sim_runtime: FrankaRuntime) -> None:
    sim = sim_runtime.sim
    for cam in sim_runtime.cameras:
        frame = cam.capture_frame()
        assert frame.depth_m is not None and frame.depth_m.shape == frame.rgb.shape[:2] == (cam.height, cam.width)
        assert frame.base_frame == "arm_link0" and frame.can_back_project
        truth = sim.camera_pose_in_arm_frame(cam.name)
        assert np.linalg.norm(frame.T_base_camera[:3, 3] - truth[:3, 3]) < 0.001, cam.name
        cos = (np.trace(frame.T_base_camera[:3, :3].T @ truth[:3, :3]) - 1) / 2
        assert math.degrees(math.acos(min(1.0, cos))) < 0.1, cam.name
        assert cam.capture().shape == frame.rgb.shape  # the colour-only path still serves video and dashboards


def test_the_cube_pixel_a_planner_picks_back_projects_onto_the_cube(toolkit: FrankaToolkit, sim_runtime) -> None:
    _ok(toolkit.execute_tool("home", {}))
    result = toolkit.execute_tool("capture_images", {})
    cameras = _ok(result)["cameras"]
    assert [c["name"] for c in cameras] == SIM_IMAGE_ORDER
    sim = sim_runtime.sim
    cube = next(o for o in sim.scene.objects if o.name == "cube")
    with sim.lock:
        body = sim.model.body("cube").id
        rotation = sim.data.xmat[body].reshape(3, 3).copy()
    centre = sim.object_in_arm_frame("cube")
    checked = []
    for entry, png in zip(cameras, result.images, strict=True):
        pixel = _red_pixel(png)
        if pixel is None:
            continue  # the arm hides the cube from this camera
        data = _ok(toolkit.execute_tool("back_project", {"camera": entry["name"], "row": pixel[0], "col": pixel[1]}))
        assert data["step"] == entry["step"] and data["frame"] == "arm_link0"
        gap = _distance_outside_cube_mm(np.asarray(data["xyz_m"]), centre, cube.size_m / 2, rotation)
        assert gap < 3.0, (entry["name"], pixel, data, gap)
        checked.append(entry["name"])
    assert {"front", "wrist"} <= set(checked)


def test_a_step_keeps_the_wrist_view_it_was_taken_with_after_the_arm_moved(toolkit: FrankaToolkit) -> None:
    _ok(toolkit.execute_tool("home", {}))
    first = _ok(toolkit.execute_tool("capture_images", {}))["cameras"]
    step = next(c["step"] for c in first if c["name"] == "wrist")
    pixel = {"camera": "wrist", "row": 100, "col": 160}
    before = _ok(toolkit.execute_tool("back_project", {**pixel, "step": step}))
    moved = _ok(toolkit.execute_tool("move_by", {"dx_m": 0.05, "dz_m": -0.05}))
    assert moved["action_result"]["reached"] is True
    later = _ok(toolkit.execute_tool("back_project", {**pixel, "step": step}))
    now = _ok(toolkit.execute_tool("back_project", pixel))
    assert later["xyz_m"] == pytest.approx(before["xyz_m"], abs=1e-4)  # the old picture, the old pose
    assert now["step"] > step and np.linalg.norm(np.subtract(now["xyz_m"], before["xyz_m"])) > 0.02
    # The depth of that step is in the run record, named like its image.
    image = next(Path(p) for p in toolkit.execute_tool("capture_images", {}).image_paths)
    assert (image.parent.parent / "depth" / f"{image.stem}.npz").is_file()


def test_dual_wrist_cameras_ride_their_own_arms_and_points_come_in_the_chosen_frame() -> None:
    from robots.dual_franka.toolkit import DUAL_SIM_IMAGE_ORDER, DualFrankaToolkit
    from robots.franka.config import ArmConfig, FrankaConfig
    from robots.franka.runtime import build_runtime

    config = FrankaConfig(arms=[ArmConfig(name="left"), ArmConfig(name="right")])
    runtime = build_runtime(config, sim=True)
    kit = DualFrankaToolkit(robot=runtime)
    try:
        cameras = _ok(kit.execute_tool("capture_images", {}))["cameras"]
        assert [c["name"] for c in cameras] == DUAL_SIM_IMAGE_ORDER and all(c["back_project"] for c in cameras)
        for name, arm_index in (("left_wrist", 0), ("right_wrist", 1)):
            frame = next(c for c in runtime.cameras if c.name == name).capture_frame()
            truth = runtime.sim.camera_pose_in_arm_frame(name, arm_index)
            assert frame.base_frame == f"{('left', 'right')[arm_index]}_link0"
            assert np.linalg.norm(frame.T_base_camera[:3, 3] - truth[:3, 3]) < 0.001
        pixel = {"camera": "front", "row": 150, "col": 160}
        left = _ok(kit.execute_tool("back_project", {"arm": "left", **pixel}))
        right = _ok(kit.execute_tool("back_project", {"arm": "right", **pixel}))
        offset = runtime.sim.arm_position(0) - runtime.sim.arm_position(1)
        assert np.subtract(right["xyz_m"], left["xyz_m"]) == pytest.approx(offset, abs=2e-4)
    finally:
        kit.close(timeout=30)
        runtime.close()


def test_bench_perception_meets_the_accuracy_bounds_per_camera() -> None:
    env = {**os.environ, "MUJOCO_GL": "egl"}
    done = subprocess.run(
        [sys.executable, str(BENCH), "--pixels", "50", "--json"], capture_output=True, text=True, env=env, timeout=280
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(report["per_camera"]) == {"front", "top", "wrist"}
    for camera, stats in report["per_camera"].items():
        assert stats["n"] >= 50, camera
        assert stats["median_mm"] <= 5.0 and stats["p90_mm"] <= 10.0, (camera, stats)
