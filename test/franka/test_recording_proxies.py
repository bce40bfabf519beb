"""A toolkit whose arms are runtime nodes' proxies (the ROS toolkit node) records no stream, and starts."""

from __future__ import annotations

from typing import Any

from robots.franka.config import ArmConfig, FrankaConfig
from robots.franka.runtime import FrankaRuntime
from robots.franka.toolkit import FrankaToolkit


class ProxyLike:
    """What rpent_ros's RuntimeProxy looks like to the toolkit: any public attribute is a remote call."""

    def __init__(self, envelope: Any) -> None:
        self.envelope = envelope
        self.name = "arm"

    def __getattr__(self, method: str) -> Any:
        if method.startswith("_"):
            raise AttributeError(method)
        return lambda *args, **kwargs: None


def test_a_toolkit_over_proxies_records_no_stream(tmp_path):
    franka = FrankaConfig(arms=[ArmConfig()])
    safety = franka.safety()
    arm = ProxyLike(safety.envelope("arm", (0.0, 0.0, 0.0)))
    runtime = FrankaRuntime(arms={"arm": arm}, grippers={}, cameras=[], arm_configs={"arm": franka.arms[0]},
                            safety=safety)
    kit = FrankaToolkit(robot=runtime, output_dir=tmp_path / "run", record_hz=15.0, task="t")
    try:
        assert kit.recording is None
        assert not (tmp_path / "run" / "stream").exists()
    finally:
        kit.close(timeout=5)
