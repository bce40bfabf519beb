"""Two arms moving together keep their distance: the check between arms that one arm's safety
envelope (robots.franka.safety) cannot make alone."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from robots.franka.safety import SafetyEnvelope
from rpent.runtime.arm import MotionRefused


def check_arm_clearance(paths: Sequence[tuple[SafetyEnvelope, np.ndarray]], what: str = "path") -> None:
    """Arms moving together (or standing, as a one-configuration path) keep `min_arm_distance_m`.

    Distances are between the arms' check points (link centre lines and hand points). Every
    sample of one arm is compared with every sample of the other, so two paths that merely cross
    at different times are refused too: conservative, and independent of how long each takes.
    """
    subsampled = [(env, env.world_points(_subsample(path, 16))) for env, path in paths]
    for i, (env_a, points_a) in enumerate(subsampled):
        for env_b, points_b in subsampled[i + 1:]:
            minimum = max(env_a.limits.min_arm_distance_m, env_b.limits.min_arm_distance_m)
            a = points_a.reshape(-1, 3)
            b = points_b.reshape(-1, 3)
            distance = float(np.sqrt(np.min(np.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=2))))
            if distance < minimum:
                raise MotionRefused(
                    f"{env_a.arm_name}+{env_b.arm_name}.{what}.arm_distance_m", round(distance, 4),
                    f"min_arm_distance_m {minimum} between the arms' links",
                )


def _subsample(path: np.ndarray, count: int) -> np.ndarray:
    if len(path) <= count:
        return path
    return path[np.unique(np.linspace(0, len(path) - 1, count).round().astype(int))]
