"""One LIBERO task in this process: physics without camera observations, cameras on demand.

robosuite renders every camera on every step when camera observations are on (400-800 ms a
step on a CPU). Here physics steps without them, and a tuned `mujoco.Renderer` draws a camera
only when asked (no shadows, reflections or multisampling; visual geoms only). MuJoCo's own
renderer returns images upright, unlike robosuite's camera observations.

The "robot frame" used by the tools is the robot base frame: origin at the base of the arm,
x forward (away from the base, over the table), y to the robot's left, z up; metres.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rpent.runtime.gl_thread import on_gl_thread

SUITES = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
CAMERAS = ("agentview", "robot0_eye_in_hand")
ACTION_DIM = 7
#: Zero-motion steps after an init state is applied, so resting objects settle before acting.
SETTLE_STEPS = 5


@dataclass(frozen=True)
class TaskRef:
    """A LIBERO task as the benchmark lists it (no simulator needed)."""

    suite: str
    task_id: int
    name: str
    language: str
    bddl_path: Path
    n_init_states: int


def _benchmark(suite: str) -> Any:
    if suite not in SUITES:
        raise ValueError(f"suite: must be one of {', '.join(SUITES)}, got {suite!r}")
    from libero.libero import benchmark

    return benchmark.get_benchmark(suite)()


def task_ref(suite: str, task_id: int) -> TaskRef:
    """Look a task up by suite and index; ValueError names the field and the allowed range."""
    bench = _benchmark(suite)
    n = bench.get_num_tasks()
    if not 0 <= task_id < n:
        raise ValueError(f"task_id: must be from 0 to {n - 1} for {suite}, got {task_id}")
    from libero.libero import get_libero_path

    task = bench.get_task(task_id)
    path = Path(get_libero_path("bddl_files")) / task.problem_folder / task.bddl_file
    states = bench.get_task_init_states(task_id)
    return TaskRef(suite, task_id, task.name, task.language, path, len(states))


def init_states(suite: str, task_id: int) -> np.ndarray:
    return np.asarray(_benchmark(suite).get_task_init_states(task_id))


class LiberoSim:
    """Owns one LIBERO ControlEnv and its renderer; not thread-safe (the server serialises calls)."""

    def __init__(
        self,
        suite: str,
        task_id: int,
        *,
        init_state: int = 0,
        seed: int = 0,
        camera_size: int = 256,
    ) -> None:
        os.environ.setdefault("MUJOCO_GL", "egl")
        self.ref = task_ref(suite, task_id)
        if not 0 <= init_state < self.ref.n_init_states:
            raise ValueError(f"init_state: must be from 0 to {self.ref.n_init_states - 1}, got {init_state}")
        if not 16 <= camera_size <= 1024:
            raise ValueError(f"camera_size: must be from 16 to 1024 pixels, got {camera_size}")
        self.init_states = init_states(suite, task_id)
        self.init_state = init_state
        self.seed = seed
        self.camera_size = camera_size

        from libero.libero.envs.env_wrapper import ControlEnv

        # hard_reset=False keeps one MjModel for the env's life: resets take milliseconds instead
        # of a model reload, and the renderer below stays bound to the live model.
        self.env = ControlEnv(
            bddl_file_name=str(self.ref.bddl_path),
            has_offscreen_renderer=False,
            use_camera_obs=False,
            hard_reset=False,
        )
        self.env.seed(seed)
        self._raw = self.env.env
        self.objects = list(self._raw.objects_dict)
        self.fixtures = list(getattr(self._raw, "fixtures_dict", {}))
        self.goal = [list(map(str, p)) for p in self._raw.parsed_problem.get("goal_state", [])]
        self._renderers: dict[tuple[int, int], Any] = {}
        self._scene_option: Any = None
        self._label_of_body: np.ndarray | None = None
        self.last_obs: dict[str, Any] = {}
        self.steps = 0

    # -- episode ---------------------------------------------------------------------------
    def reset(self, *, init_state: int | None = None, seed: int | None = None) -> dict[str, Any]:
        """Reset and apply the init state (default: the configured one), then let objects settle."""
        if init_state is not None:
            if not 0 <= init_state < len(self.init_states):
                raise ValueError(f"init_state: must be from 0 to {len(self.init_states) - 1}, got {init_state}")
            self.init_state = init_state
        if seed is not None:
            self.seed = seed
            self.env.seed(seed)
        self.env.reset()
        obs = self.env.set_init_state(self.init_states[self.init_state])
        self.steps = 0
        still = np.zeros(ACTION_DIM)
        still[-1] = -1.0
        for _ in range(SETTLE_STEPS):
            obs, *_ = self.env.step(still)
        self.steps = 0
        self.last_obs = self._compact(obs)
        return self.last_obs

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], float, bool, dict[str, Any]]:
        obs, reward, done, info = self.env.step(np.asarray(action, dtype=np.float64))
        self.steps += 1
        self.last_obs = self._compact(obs)
        return self.last_obs, float(reward), bool(done), dict(info)

    def success(self) -> bool:
        return bool(self.env.check_success())

    def sim_state(self) -> np.ndarray:
        return np.asarray(self.env.get_sim_state(), dtype=np.float64)

    def _compact(self, obs: dict[str, Any]) -> dict[str, Any]:
        # Aggregates (object-state, proprio-state) duplicate the per-key entries; drop them.
        out = {k: np.asarray(v) for k, v in obs.items() if not k.endswith("-state")}
        out["base_pos"], out["base_quat"] = self.base_pose()
        return out

    def base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """World position and (x, y, z, w) orientation of the robot base (robosuite's quaternion order)."""
        sim = self._raw.sim
        body = sim.model.body_name2id(self._raw.robots[0].robot_model.root_body)
        w, x, y, z = sim.data.body_xquat[body]  # MuJoCo stores w first
        return np.array(sim.data.body_xpos[body]), np.array([x, y, z, w])

    # -- cameras ---------------------------------------------------------------------------
    def render(self, camera: str, width: int | None = None, height: int | None = None) -> np.ndarray:
        return on_gl_thread(lambda: self._draw(camera, width, height, segmentation=False), timeout_s=None)

    def segment(self, camera: str, width: int | None = None, height: int | None = None) -> dict[str, Any]:
        """Label image (0 background, i = names[i-1]) of the task's objects and fixtures."""
        seg = on_gl_thread(lambda: self._draw(camera, width, height, segmentation=True), timeout_s=None)
        labels = self._body_labels()
        names = [*self.objects, *self.fixtures]
        geom_ids = seg[..., 0]
        is_geom = (seg[..., 1] == self._mujoco().mjtObj.mjOBJ_GEOM) & (geom_ids >= 0)
        body_of_geom = self._raw.sim.model._model.geom_bodyid
        label = np.zeros(geom_ids.shape, np.int32)
        label[is_geom] = labels[body_of_geom[geom_ids[is_geom]]]
        return {"labels": label, "names": names}

    def object_boxes(self) -> dict[str, np.ndarray]:
        """World axis-aligned bounding box (min xyz, max xyz) of every task object's collision geoms."""
        model, data = self._raw.sim.model._model, self._raw.sim.data._data
        labels = self._body_labels()[model.geom_bodyid]
        # Collision geoms only (group 0): visual meshes can overhang what the gripper touches.
        collide = (model.geom_group == 0) & (model.geom_contype | model.geom_conaffinity != 0)
        boxes: dict[str, np.ndarray] = {}
        corners = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], np.float64)
        for index, name in enumerate(self.objects, start=1):
            geoms = np.nonzero((labels == index) & collide)[0]
            if len(geoms) == 0:
                continue
            points = []
            for g in geoms:
                centre, half = model.geom_aabb[g, :3], model.geom_aabb[g, 3:]
                local = centre + corners * half
                points.append(local @ data.geom_xmat[g].reshape(3, 3).T + data.geom_xpos[g])
            stacked = np.concatenate(points)
            boxes[name] = np.concatenate([stacked.min(axis=0), stacked.max(axis=0)])
        return boxes

    @staticmethod
    def _mujoco() -> Any:
        import mujoco

        return mujoco

    def _draw(self, camera: str, width: int | None, height: int | None, *, segmentation: bool) -> np.ndarray:
        mujoco = self._mujoco()
        w, h = width or self.camera_size, height or self.camera_size
        model, data = self._raw.sim.model._model, self._raw.sim.data._data
        renderer = self._renderers.get((w, h))
        if renderer is None:
            model.vis.quality.offsamples = 0
            # The offscreen buffer must hold the largest image asked for.
            model.vis.global_.offwidth = max(model.vis.global_.offwidth, w)
            model.vis.global_.offheight = max(model.vis.global_.offheight, h)
            renderer = mujoco.Renderer(model, height=h, width=w)
            for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
                renderer.scene.flags[flag] = 0
            self._renderers[(w, h)] = renderer
        if self._scene_option is None:
            option = mujoco.MjvOption()
            option.geomgroup[0] = 0  # robosuite keeps collision meshes in group 0: hide them
            self._scene_option = option
        if segmentation:
            renderer.enable_segmentation_rendering()
        try:
            renderer.update_scene(data, camera=camera, scene_option=self._scene_option)
            return renderer.render().copy()
        finally:
            if segmentation:
                renderer.disable_segmentation_rendering()

    def _body_labels(self) -> np.ndarray:
        """For every body, 1 + the index of the task object or fixture it belongs to (0 = none)."""
        if self._label_of_body is not None:
            return self._label_of_body
        model = self._raw.sim.model._model
        mujoco = self._mujoco()
        root_label: dict[str, int] = {}
        registry = {**self._raw.objects_dict, **getattr(self._raw, "fixtures_dict", {})}
        for i, name in enumerate([*self.objects, *self.fixtures], start=1):
            root_label[registry[name].root_body] = i
        labels = np.zeros(model.nbody, np.int32)
        for body in range(model.nbody):
            # Walk up to the object's root body (articulated objects have links below it).
            b = body
            while b > 0:
                name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b)
                if name in root_label:
                    labels[body] = root_label[name]
                    break
                b = int(model.body_parentid[b])
        self._label_of_body = labels
        return labels

    def close(self) -> None:
        def free() -> None:
            for renderer in self._renderers.values():
                renderer.close()
            self._renderers.clear()

        try:
            on_gl_thread(free, timeout_s=10)
        finally:
            self.env.close()
