"""How far `back_project`'s point is from the truth, on franky-sim's cameras, and what a call costs.

For each camera (fixed "front" and "top", the hand's "wrist" from two arm poses) the toolkit takes
its pictures the way a model gets them (capture_images), then N pixels are drawn at random among
those MuJoCo's segmentation rendering shows on an object (cubes: faces, edges and corners alike).
Each goes through the `back_project` tool; the truth is where mj_ray from the camera through that
pixel's centre first hits a visible geom. Printed per camera and overall: median and 90th
percentile of the distance, and the time per call (the tool through the Toolkit, and the estimate
alone).

    MUJOCO_GL=egl python bench/bench_perception.py [--pixels 50] [--seed 0] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco

from robots.franka.back_projection import robust_depth
from robots.franka.camera_mount import fovy_intrinsics
from robots.franka.config import FrankaConfig
from robots.franka.runtime import build_runtime
from robots.franka.sim.world import mujoco_camera_pose
from robots.franka.toolkit import FrankaToolkit

VISIBLE_GROUPS = np.array([1, 1, 1, 0, 0, 0], dtype=np.uint8)  # what the renderer draws by default
# Arm poses the wrist camera looks from: home, and lower over the table to one side.
WRIST_POSES = ({"tool": "home", "arguments": {}}, {"tool": "move_to", "arguments": {"x_m": 0.45, "y_m": 0.08, "z_m": 0.42}})


def _ok(result: Any) -> dict[str, Any]:
    if result.error is not None:
        raise RuntimeError(result.error)
    return result.data


def _object_pixels(sim: Any, camera: str, width: int, height: int, object_geoms: set[int]) -> np.ndarray:
    """(row, col) of every pixel whose segmentation is an object geom (rendered from the same state)."""
    renderer = mujoco.Renderer(sim.model, height, width)
    try:
        with sim.lock:
            renderer.update_scene(sim.data, camera=camera)
        renderer.enable_segmentation_rendering()
        seg = renderer.render().copy()
    finally:
        renderer.close()
    is_geom = seg[..., 1] == int(mujoco.mjtObj.mjOBJ_GEOM)
    on_object = is_geom & np.isin(seg[..., 0], sorted(object_geoms))
    return np.argwhere(on_object)


def _ray_truth(sim: Any, camera: str, width: int, height: int, row: int, col: int) -> tuple[np.ndarray, int] | None:
    """World point where the pixel's ray first hits a visible geom, and that geom."""
    cam_id = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    k = fovy_intrinsics(float(sim.model.cam_fovy[cam_id]), width, height)
    with sim.lock:
        pose = mujoco_camera_pose(sim.data, cam_id)
        direction = pose[:3, :3] @ k.ray(float(row), float(col))
        direction /= np.linalg.norm(direction)
        geom = np.array([-1], dtype=np.int32)
        distance = mujoco.mj_ray(sim.model, sim.data, pose[:3, 3], direction, VISIBLE_GROUPS, 1, -1, geom)
    if distance < 0:
        return None
    return pose[:3, 3] + distance * direction, int(geom[0])


def measure(pixels_per_view: int = 50, seed: int = 0) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    config = FrankaConfig()
    width, height = config.sim_camera_width, config.sim_camera_height
    runtime = build_runtime(config, sim=True)
    kit = FrankaToolkit(robot=runtime)
    sim = runtime.sim
    assert sim is not None
    object_geoms = {mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_GEOM, f"{o.name}_geom") for o in sim.scene.objects}
    errors: dict[str, list[float]] = {}
    tool_ms: list[float] = []
    estimate_ms: list[float] = []
    try:
        views = [("front", None), ("top", None), *(("wrist", pose) for pose in WRIST_POSES)]
        for camera, pose in views:
            if pose is not None:
                _ok(kit.execute_tool(pose["tool"], pose["arguments"]))
            shown = _ok(kit.execute_tool("capture_images", {}))["cameras"]
            step = next(c["step"] for c in shown if c["name"] == camera)
            candidates = _object_pixels(sim, camera, width, height, object_geoms)
            if len(candidates) == 0:
                raise RuntimeError(f"camera {camera}: no object in view")
            picks = candidates[rng.choice(len(candidates), size=min(pixels_per_view, len(candidates)), replace=False)]
            depth = kit.state["franka.frames"].get(camera, step).depth_m
            for row, col in picks:
                truth = _ray_truth(sim, camera, width, height, int(row), int(col))
                if truth is None:
                    continue
                start = time.perf_counter()
                result = _ok(kit.execute_tool("back_project", {"camera": camera, "row": int(row), "col": int(col), "step": step}))
                tool_ms.append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                robust_depth(depth, int(row), int(col), 6)
                estimate_ms.append((time.perf_counter() - start) * 1000)
                point_world = np.asarray(result["xyz_m"]) + sim.arm_position(0)
                errors.setdefault(camera, []).append(1000 * float(np.linalg.norm(point_world - truth[0])))
    finally:
        kit.close(timeout=30)
        runtime.close()
    everything = [e for values in errors.values() for e in values]

    def stats(values: list[float]) -> dict[str, float]:
        return {"n": len(values), "median_mm": float(np.median(values)), "p90_mm": float(np.percentile(values, 90)),
                "max_mm": float(np.max(values))}  # fmt: skip

    return {
        "per_camera": {camera: stats(values) for camera, values in errors.items()},
        "all": stats(everything),
        "tool_call_ms": {"median": statistics.median(tool_ms), "p90": float(np.percentile(tool_ms, 90))},
        "estimate_ms": {"median": statistics.median(estimate_ms), "p90": float(np.percentile(estimate_ms, 90))},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pixels", type=int, default=50, help="random object pixels per camera view (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    report = measure(args.pixels, args.seed)
    if args.json:
        print(json.dumps(report))
        return
    print(f"{'camera':<8} {'n':>4} {'median mm':>10} {'p90 mm':>8} {'max mm':>8}")
    for camera, s in [*report["per_camera"].items(), ("all", report["all"])]:
        print(f"{camera:<8} {s['n']:>4} {s['median_mm']:>10.2f} {s['p90_mm']:>8.2f} {s['max_mm']:>8.2f}")
    tool, est = report["tool_call_ms"], report["estimate_ms"]
    print(f"back_project through the Toolkit: median {tool['median']:.2f} ms, p90 {tool['p90']:.2f} ms per call")
    print(f"depth estimate alone:             median {est['median']:.3f} ms, p90 {est['p90']:.3f} ms per call")


if __name__ == "__main__":
    main()
