"""The simulated cameras' geometry: what capture_frame reports is what MuJoCo renders.

Built offline (no franky-sim servers): the scene's model is posed directly through qpos.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
mujoco = pytest.importorskip("mujoco", reason="mujoco is not installed (pip install rpent[sim])")
pytest.importorskip("franky_sim", reason="franky-sim is not installed (pip install rpent[sim])")

from robots.franka import kinematics  # noqa: E402
from robots.franka.camera_mount import fovy_intrinsics  # noqa: E402
from robots.franka.config import HOME_JOINTS_RAD  # noqa: E402
from robots.franka.sim.simulator import SimScene, scene_model  # noqa: E402
from robots.franka.sim.world import mujoco_camera_pose, wrist_camera_on_flange  # noqa: E402

# FR3 joint limits (rad), a little inside, for random poses.
_LOW = np.array([-2.7, -1.7, -2.8, -3.0, -2.8, 0.6, -2.8])
_HIGH = np.array([2.7, 1.7, 2.8, -0.2, 2.8, 4.4, 2.8])


def _qpos_addresses(model, arm_index: int) -> list[int]:
    return [
        int(model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"robot{arm_index}_fr3_joint{i}")])
        for i in range(1, 8)
    ]


def _rotation_angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    cos = (np.trace(a.T @ b) - 1.0) / 2.0
    return math.degrees(math.acos(max(-1.0, min(1.0, cos))))


@pytest.mark.parametrize(("scene", "camera"), [(SimScene(), "wrist"), (SimScene.dual(), "right_wrist")])
def test_wrist_pose_from_joints_and_t_flange_camera_matches_mujoco(scene: SimScene, camera: str) -> None:
    model, data = scene_model(scene)
    arm_index, t_flange_camera = wrist_camera_on_flange(model, camera)
    assert arm_index == (1 if camera == "right_wrist" else 0)
    cam_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    addresses = _qpos_addresses(model, arm_index)
    base = np.asarray(scene.arm_positions[arm_index])
    rng = np.random.default_rng(14)
    worst_mm, worst_deg = 0.0, 0.0
    for _ in range(50):
        q = rng.uniform(_LOW, _HIGH)
        data.qpos[addresses] = q
        mujoco.mj_forward(model, data)
        truth = mujoco_camera_pose(data, cam_id)
        truth[:3, 3] -= base
        composed = kinematics.flange_pose(q) @ t_flange_camera
        worst_mm = max(worst_mm, 1000 * float(np.linalg.norm(composed[:3, 3] - truth[:3, 3])))
        worst_deg = max(worst_deg, _rotation_angle_deg(composed[:3, :3], truth[:3, :3]))
    assert worst_mm <= 1.0 and worst_deg <= 0.1, (worst_mm, worst_deg)


def test_world_cameras_are_not_wrist_cameras() -> None:
    model, _ = scene_model(SimScene())
    with pytest.raises(KeyError, match="not carried by an arm"):
        wrist_camera_on_flange(model, "front")


@pytest.mark.parametrize("camera", ["front", "top", "wrist"])
def test_fovy_intrinsics_and_rendered_depth_agree_with_ray_casts(camera: str) -> None:
    """Pixel (row, col) at rendered depth z, through K and the optical pose, is where mj_ray hits."""
    width, height = 320, 240
    model, data = scene_model(SimScene())
    data.qpos[_qpos_addresses(model, 0)] = HOME_JOINTS_RAD
    mujoco.mj_forward(model, data)
    cam_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    k = fovy_intrinsics(float(model.cam_fovy[cam_id]), width, height)
    pose = mujoco_camera_pose(data, cam_id)
    renderer = mujoco.Renderer(model, height, width)
    try:
        renderer.update_scene(data, camera=camera)
        renderer.enable_depth_rendering()
        depth = renderer.render().copy()
    finally:
        renderer.close()
    rng = np.random.default_rng(3)
    visible = np.array([1, 1, 1, 0, 0, 0], dtype=np.uint8)  # the renderer's default groups (3+: collision shapes)
    errors = []
    for row, col in zip(rng.integers(0, height, 200), rng.integers(0, width, 200), strict=True):
        ray = pose[:3, :3] @ k.ray(float(row), float(col))
        geom = np.array([-1], dtype=np.int32)
        distance = mujoco.mj_ray(model, data, pose[:3, 3], ray / np.linalg.norm(ray), visible, 1, -1, geom)
        if distance > 0:
            errors.append(abs(float(depth[row, col]) - distance / float(np.linalg.norm(ray))))
    assert len(errors) > 150
    # Half a pixel off would show as centimetres at the cubes' edges; exact pixels agree to float precision.
    assert float(np.percentile(errors, 99)) < 1e-4, max(errors)
