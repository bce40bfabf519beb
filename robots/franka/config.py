"""How a Franka deployment is described: arms (FCI hosts), cameras, and the safety file."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field

from robots.franka.safety import SafetyConfig, load_safety_config


def _config_dir() -> Path:
    """config/ of the source tree, or share/rpent/config of a ROS 2 (colcon) install."""
    source = Path(__file__).resolve().parents[2] / "config"
    if source.is_dir():
        return source
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        installed = Path(prefix) / "share" / "rpent" / "config"
        if prefix and installed.is_dir():
            return installed
    return source


CONFIG_DIR = _config_dir()
DEFAULT_SAFETY_FILE = CONFIG_DIR / "franka_safety.yaml"

# The simulator's start configuration; the end effector is then ~0.55 m in front of the base,
# ~0.52 m up, pointing down. Well inside every FR3 joint limit.
HOME_JOINTS_RAD = (0.0, 0.0, 0.0, -1.57, 0.0, 1.57, 0.785)


class ArmConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = "arm"
    host: str = "172.16.0.2"
    gripper: bool = True
    dynamics_factor: float = Field(0.5, gt=0, le=1.0, description="franky's global relative dynamics factor")
    torque_threshold_nm: float = Field(20.0, gt=0)
    force_threshold_n: float = Field(30.0, gt=0)
    home_joints_rad: tuple[float, float, float, float, float, float, float] = HOME_JOINTS_RAD
    gripper_speed_m_s: float = Field(0.05, gt=0, le=0.1)
    connect_timeout_s: float = Field(5.0, gt=0)
    # Where this arm's base stands in the shared world frame (the frame of the safety file's table);
    # with several arms it is what keeps them apart. With --sim the simulated scene sets it.
    base_xyz_m: tuple[float, float, float] = (0.0, 0.0, 0.0)


class CameraConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    device: int | str = 0
    width: int = Field(640, gt=0)
    height: int = Field(480, gt=0)
    fps: float = Field(30.0, gt=0)


class FrankaConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arms: list[ArmConfig] = [ArmConfig()]
    cameras: list[CameraConfig] = []
    sim_camera_width: int = Field(320, gt=0)
    sim_camera_height: int = Field(240, gt=0)
    safety_file: str | None = str(DEFAULT_SAFETY_FILE)
    # Set from the command line (--approve-motions): overrides require_approval for every arm.
    require_approval: bool | None = None

    def safety(self) -> SafetyConfig:
        safety = load_safety_config(self.safety_file)
        if self.require_approval is None:
            return safety
        default = safety.default.model_copy(update={"require_approval": self.require_approval})
        arms = {name: {**override, "require_approval": self.require_approval} for name, override in safety.arms.items()}
        return safety.model_copy(update={"default": default, "arms": arms})


def load_franka_config(path: str | Path | None) -> FrankaConfig:
    """Read a deployment YAML; None gives one arm with defaults and the bundled safety file."""
    if path is None:
        return FrankaConfig()
    path = Path(path)
    data = yaml.safe_load(path.read_text()) or {}
    safety = data.get("safety_file")
    if safety and not Path(safety).is_absolute():
        data["safety_file"] = str((path.parent / safety).resolve())
    try:
        return FrankaConfig.model_validate(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from exc
