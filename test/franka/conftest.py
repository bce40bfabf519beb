"""Shared fixtures: franky-sim started in this process with the RPent table scene."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

franky = pytest.importorskip("franky", reason="franky-control is not installed (pip install rpent[sim])")
pytest.importorskip("franky_sim", reason="franky-sim is not installed (pip install rpent[sim])")

from robots.franka.config import FrankaConfig  # noqa: E402
from robots.franka.runtime import FrankaRuntime, build_runtime  # noqa: E402


def wait_sim_time(runtime: FrankaRuntime, seconds: float, wall_timeout_s: float = 30.0) -> None:
    """Let `seconds` of simulated time pass (the sim may run slower than real time)."""
    assert runtime.sim is not None
    runtime.sim.wait_until(runtime.sim.time_s + seconds, wall_timeout_s)


@pytest.fixture
def let_sim_run():
    """`let_sim_run(runtime, seconds)` waits until that much simulated time has passed."""
    return wait_sim_time


@pytest.fixture(scope="module")
def sim_runtime() -> Iterator[FrankaRuntime]:
    runtime = build_runtime(FrankaConfig(), sim=True)
    try:
        yield runtime
    finally:
        runtime.close()
