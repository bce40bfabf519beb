"""What the fixed cameras show of a random scene, rendered by MuJoCo as the sim cameras render it:
every object whole in view, and the scripted planner's colour detection on those pictures."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
from scripted_pick import SURVEY_XYZ_M, find_red_blob

from robots.franka.config import CONFIG_DIR, HOME_JOINTS_RAD, load_franka_config
from robots.franka.sim.scene_layout import random_scene
from robots.franka.sim.simulator import SimScene, scene_model
from rpent.runtime.types import Pose
from rpent.tools.images import encode_png

SAFETY = load_franka_config(CONFIG_DIR / "franka.yaml").safety()
WIDTH, HEIGHT = 320, 240  # the sim cameras' default size (config sim_camera_width/height)
AWAY = object()  # the arms' pose: at the survey pose, out of the overhead camera's view


def _layout(seed: int, dual: bool) -> tuple[SimScene, list]:
    base = SimScene.dual() if dual else SimScene()
    names = ["left", "right"] if dual else ["arm"]
    envelopes = [SAFETY.envelope(n, p) for n, p in zip(names, base.arm_positions, strict=True)]
    return random_scene(seed, base, envelopes, [HOME_JOINTS_RAD] * len(names), WIDTH / HEIGHT), envelopes


class _View:
    """The scene's MuJoCo model (no servers, no stepping) with arms and objects posed by hand."""

    def __init__(self, scene: SimScene, envelopes: list) -> None:
        self.scene = scene
        self.model, self.data = scene_model(scene)
        self.renderer = mujoco.Renderer(self.model, HEIGHT, WIDTH)
        down = (math.pi, 0.0, 0.0)
        self.away = [env.check_cartesian_motion(HOME_JOINTS_RAD, [Pose.from_rpy(SURVEY_XYZ_M, down)])[-1] for env in envelopes]

    def close(self) -> None:
        self.renderer.close()

    def pose_arms(self, at_survey: bool) -> None:
        for arm in range(len(self.scene.arm_positions)):
            joints = self.away[arm] if at_survey else HOME_JOINTS_RAD
            for j, q in enumerate(joints, start=1):
                joint = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, f"robot{arm}_fr3_joint{j}")
                self.data.qpos[self.model.jnt_qposadr[joint]] = q

    def show_only(self, keep: set[str]) -> None:
        """Objects not in `keep` go far below the floor (out of every camera's view)."""
        for obj in self.scene.objects:
            address = self.model.jnt_qposadr[mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, f"{obj.name}_joint")]
            position = obj.position if obj.name in keep else (0.0, 0.0, -10.0)
            self.data.qpos[address:address + 3] = position
            half = math.radians(obj.yaw_deg) / 2
            self.data.qpos[address + 3:address + 7] = (math.cos(half), 0.0, 0.0, math.sin(half))
        mujoco.mj_forward(self.model, self.data)

    def pixels(self, camera: str) -> dict[str, np.ndarray]:
        """Per object, the mask of the pixels where it is the nearest thing seen."""
        self.renderer.enable_segmentation_rendering()
        self.renderer.update_scene(self.data, camera=camera)
        segmentation = self.renderer.render()
        self.renderer.disable_segmentation_rendering()
        masks = {}
        for obj in self.scene.objects:
            geom = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, f"{obj.name}_geom")
            masks[obj.name] = (segmentation[..., 0] == geom) & (segmentation[..., 1] == mujoco.mjtObj.mjOBJ_GEOM)
        return masks

    def png(self, camera: str) -> bytes:
        self.renderer.update_scene(self.data, camera=camera)
        return encode_png(self.renderer.render())

    def project(self, camera: str, point: np.ndarray) -> tuple[float, float]:
        """(row, col) of a world point in the camera's image, MuJoCo's pinhole (fovy, square pixels)."""
        cam = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        local = self.data.cam_xmat[cam].reshape(3, 3).T @ (point - self.data.cam_xpos[cam])
        focal = HEIGHT / 2 / math.tan(math.radians(self.model.cam_fovy[cam]) / 2)
        return HEIGHT / 2 - focal * local[1] / -local[2] - 0.5, WIDTH / 2 + focal * local[0] / -local[2] - 0.5


def _whole_and_unhidden(view: _View, camera: str) -> None:
    names = {o.name for o in view.scene.objects}
    view.show_only(names)
    together = view.pixels(camera)
    for name in names:
        view.show_only({name})
        alone = view.pixels(camera)[name]
        rows, cols = np.nonzero(alone)
        assert len(rows) >= 20, (camera, name, "hardly visible")
        assert rows.min() > 0 and cols.min() > 0 and rows.max() < HEIGHT - 1 and cols.max() < WIDTH - 1, (camera, name)
        assert together[name].sum() >= 0.9 * alone.sum(), (camera, name, "hidden behind another object")


@pytest.mark.slow
@pytest.mark.parametrize("dual", [False, True], ids=["franka", "dual_franka"])
def test_every_object_is_seen_whole_by_the_front_camera_with_the_arms_at_home_and_by_both_with_them_away(dual):
    for seed in range(1, 11 if not dual else 6):
        view = _View(*_layout(seed, dual))
        try:
            view.pose_arms(at_survey=False)
            _whole_and_unhidden(view, "front")
            view.pose_arms(at_survey=True)
            _whole_and_unhidden(view, "front")
            _whole_and_unhidden(view, "top")
        finally:
            view.close()


@pytest.mark.slow
def test_the_red_cube_is_found_by_colour_at_its_top_face_centre_with_its_edges_direction():
    for seed in range(1, 11):
        scene, envelopes = _layout(seed, dual=False)
        view = _View(scene, envelopes)
        try:
            view.pose_arms(at_survey=True)
            view.show_only({o.name for o in scene.objects})
            blob = find_red_blob(view.png("top"))
            cube = scene.objects[0]
            top_centre = np.asarray(cube.position) + np.array([0.0, 0.0, cube.size_m / 2])
            row, col = view.project("top", top_centre)
            assert blob is not None, seed
            assert math.hypot(blob.row - row, blob.col - col) < 1.0, (seed, (blob.row, blob.col), (row, col))
            # Overhead, image right is world +y and image down is world +x: an edge at yaw t runs along
            # the image angle 90 - t (mod 90 for a cube).
            turn = (blob.edge_angle_deg - (90 - cube.yaw_deg)) % 90
            assert min(turn, 90 - turn) < 8.0, (seed, blob.edge_angle_deg, cube.yaw_deg)
        finally:
            view.close()


def test_a_picture_without_red_gives_no_blob():
    grey = np.full((HEIGHT, WIDTH, 3), 128, np.uint8)
    grey[50:60, 50:60] = (20, 160, 40)  # a green patch is not red
    assert find_red_blob(encode_png(grey)) is None
