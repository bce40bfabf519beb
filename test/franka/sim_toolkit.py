"""A toolkit on a simulator of its own, and what the simulated robot was last commanded: shared by the
sim tests that judge a refusal by nothing reaching franky (test_truth_sim, test_keep_out_sim)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from robots.franka.config import FrankaConfig
from robots.franka.runtime import FrankaRuntime, build_runtime
from robots.franka.sim.simulator import SimScene
from robots.franka.toolkit import FrankaToolkit


@contextmanager
def own_sim(config: FrankaConfig, kit_class: type[FrankaToolkit], output_dir: Path,
            scene: SimScene | None = None) -> Iterator[tuple[FrankaToolkit, FrankaRuntime]]:
    """A toolkit on a simulator of its own (no cameras), closed afterwards."""
    runtime = build_runtime(config, sim=True, scene=scene, sim_cameras=False)
    kit = kit_class(robot=runtime, output_dir=output_dir)
    try:
        yield kit, runtime
    finally:
        kit.close(timeout=30)
        runtime.close()


def commanded(runtime: FrankaRuntime) -> np.ndarray:
    """The joint position the robot is commanded to hold (libfranka's q_d): unchanged if nothing was sent."""
    return np.asarray(runtime.arm()._robot.state.q_d)
