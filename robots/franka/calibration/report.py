"""What `rpent calibrate` compares its result with: the value in the config it would replace, and
in the simulator the camera's true pose; and where a result may be written.

A simulator calibration is never written into a deployment config: that is the file the real arms
and cameras are configured from. It goes into `<config>.sim.yaml` beside it (first written as a copy
of the config), which `rpent run --sim --config <that file>` uses to try a calibration's effect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robots.franka.config import load_franka_config

SIM_SUFFIX = ".sim"


def sim_config_path(config: Path) -> Path:
    """Where a simulator calibration of `config` goes: `franka.yaml` -> `franka.sim.yaml`."""
    if config.stem.endswith(SIM_SUFFIX):
        return config
    return config.with_name(f"{config.stem}{SIM_SUFFIX}{config.suffix}")


def write_target(config: Path, sim: bool) -> Path:
    """The file --write edits: the deployment config, or in the simulator its .sim file."""
    return sim_config_path(config) if sim else config


@dataclass(frozen=True)
class Comparison:
    """The result against the config's value (`current`, read from `read_from`) and, in the simulator, the truth."""

    target: Path
    read_from: Path
    current: np.ndarray | None
    change: tuple[float, float] | None  # mm, deg from the current value
    truth_error: tuple[float, float] | None  # mm, deg from the simulator's pose of the camera

    def summary(self) -> dict[str, Any]:
        return {
            "target": str(self.target),
            "current": None if self.current is None else np.round(self.current, 6).tolist(),
            "change_mm": None if self.change is None else round(self.change[0], 3),
            "change_deg": None if self.change is None else round(self.change[1], 4),
            "truth_error_mm": None if self.truth_error is None else round(self.truth_error[0], 3),
            "truth_error_deg": None if self.truth_error is None else round(self.truth_error[1], 4),
        }


def difference(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Translation [mm] and rotation angle [deg] between two 4 x 4 poses."""
    mm = float(np.linalg.norm(a[:3, 3] - b[:3, 3])) * 1000.0
    cosine = (np.trace(a[:3, :3] @ b[:3, :3].T) - 1.0) / 2.0
    return mm, math.degrees(math.acos(float(np.clip(cosine, -1.0, 1.0))))


def current_value(path: Path, camera: str, key: str) -> np.ndarray | None:
    """`key` of `camera`'s entry in the config at `path`, None where it has none."""
    entry = load_franka_config(path).camera(camera)
    value = None if entry is None else getattr(entry, key, None)
    return None if value is None else np.asarray(value, dtype=float)


def sim_truth(runtime: Any, run: Any) -> np.ndarray | None:
    """Where the simulated camera really is, in the result's own terms (T_base_camera of a fixed
    camera in its arm's base, T_flange_camera of a wrist camera); None on real hardware."""
    sim = getattr(runtime, "sim", None)
    if sim is None:
        return None
    if run.mount == "wrist":
        from robots.franka.sim.world import wrist_camera_on_flange

        return wrist_camera_on_flange(sim.model, run.camera)[1]
    return sim.camera_pose_in_arm_frame(run.camera, list(runtime.arms).index(run.arm))


def compare(config: Path, run: Any, truth: np.ndarray | None, sim: bool) -> Comparison:
    target = write_target(config, sim)
    read_from = target if target.exists() else config  # a new .sim file starts as a copy of the config
    current = current_value(read_from, run.camera, run.key)
    found = run.result.transform
    return Comparison(
        target, read_from, current,
        None if current is None else difference(found, current),
        None if truth is None else difference(found, truth),
    )  # fmt: skip


def report_lines(run: Any, comparison: Comparison, config: Path, written: dict[str, Any] | None,
                 problems: list[str]) -> list[str]:
    """The lines after the residuals: the truth, the current value and the change, what was written."""
    lines = []
    c = comparison
    if c.truth_error is not None:
        lines.append(f"simulator truth: {c.truth_error[0]:.2f} mm, {c.truth_error[1]:.3f} deg from where the "
                     f"MuJoCo model has camera {run.camera}")
    if c.current is None:
        lines.append(f"current {run.key} of camera {run.camera} in {c.read_from}: none")
    else:
        lines.append(f"current {run.key} of camera {run.camera} in {c.read_from}:")
        lines += ["  " + " ".join(f"{v:10.6f}" for v in row) for row in c.current]
        assert c.change is not None
        lines.append(f"change from the current value: {c.change[0]:.2f} mm, {c.change[1]:.3f} deg")
    never = f"a simulator calibration never goes into the hardware config {config}" if c.target != config else ""
    if problems:
        lines += ["not good enough to write:", *("  " + p for p in problems)]
    elif written is not None:
        kept = "comments kept" if written["comments_kept"] else "rewritten with PyYAML: comments were lost"
        where = written["written"] if written["backup"] else f"{written['written']}, a new copy of {config}"
        line = f"written as {run.key} of camera {run.camera} to {where} ({kept})"
        line += f"; backup {written['backup']}" if written["backup"] else ""
        lines.append(line + (f"; {never}" if never else ""))
    else:
        lines.append(f"not written: pass --write to store it as {run.key} of camera {run.camera} in {c.target}"
                     + (f" ({never})" if never else ""))
    return lines
