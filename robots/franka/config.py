"""How a Franka deployment is described: arms (FCI hosts), cameras, and the safety file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

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
    # franky's real-time scheduling: None enforces it on a real arm (FCI not on loopback); false is
    # for a kernel without it, at the risk of communication reflexes under load (a policy at 15 Hz).
    realtime: bool | None = None


def _rigid_transform(value: list[list[float]]) -> list[list[float]]:
    """A 4 x 4 homogeneous transform: rotation orthonormal with det +1 (to 1e-4), last row 0 0 0 1."""
    m = np.asarray(value, float)
    if m.shape != (4, 4) or not np.all(np.isfinite(m)):
        raise ValueError("must be a 4 x 4 matrix of finite numbers (rows of [R t; 0 0 0 1], metres)")
    if not np.allclose(m[3], (0.0, 0.0, 0.0, 1.0), atol=1e-9):
        raise ValueError(f"last row must be [0, 0, 0, 1], got {m[3].tolist()}")
    r = m[:3, :3]
    if not np.allclose(r.T @ r, np.eye(3), atol=1e-4) or np.linalg.det(r) < 0:
        raise ValueError("the upper-left 3 x 3 must be a rotation (orthonormal, determinant +1, to 1e-4)")
    return m.tolist()


#: A camera pose: 4 x 4 rows [[R, t], [0, 0, 0, 1]], t in metres; maps optical-frame points (OpenCV:
#: x right, y down, z forward) into the named parent frame.
Transform = Annotated[list[list[float]], AfterValidator(_rigid_transform)]


class CameraIntrinsicsConfig(BaseModel):
    """Pinhole intrinsics at the configured width x height (pixels; OpenCV distortion order)."""

    model_config = ConfigDict(extra="forbid")
    fx: float = Field(gt=0)
    fy: float = Field(gt=0)
    cx: float
    cy: float
    distortion: tuple[float, ...] = Field((), max_length=14)


class CameraConfig(BaseModel):
    """One camera of a deployment.

    `mount: fixed` cameras may carry `T_base_camera` (the optical frame in the base frame of `arm`);
    `mount: wrist` cameras `T_flange_camera` (in `arm`'s flange frame, composed with the measured
    flange pose at capture time). A camera without its transform still gives pictures, but its pixels
    cannot be back-projected. `arm` None means the first arm. `intrinsics` overrides what the device
    (or the simulator) reports.
    """

    model_config = ConfigDict(extra="forbid")
    name: str
    kind: Literal["opencv", "realsense"] = "opencv"
    device: int | str = 0
    serial: str | None = Field(None, description="RealSense serial number (None: the only device)")
    width: int = Field(640, gt=0)
    height: int = Field(480, gt=0)
    fps: float = Field(30.0, gt=0)
    mount: Literal["fixed", "wrist"] = "fixed"
    arm: str | None = None
    T_base_camera: Transform | None = None
    T_flange_camera: Transform | None = None
    intrinsics: CameraIntrinsicsConfig | None = None

    @model_validator(mode="after")
    def _transform_matches_mount(self) -> CameraConfig:
        if self.mount == "fixed" and self.T_flange_camera is not None:
            raise ValueError(
                f"camera {self.name!r}: T_flange_camera is for mount: wrist; a fixed camera takes T_base_camera"
            )
        if self.mount == "wrist" and self.T_base_camera is not None:
            raise ValueError(
                f"camera {self.name!r}: T_base_camera is for mount: fixed; a wrist camera takes T_flange_camera"
            )
        return self

    def transform(self) -> np.ndarray | None:
        """The configured extrinsic (T_base_camera or T_flange_camera, by mount) as 4 x 4, or None."""
        value = self.T_base_camera if self.mount == "fixed" else self.T_flange_camera
        return None if value is None else np.asarray(value, float)


class PolicyConfig(BaseModel):
    """How run_policy drives an arm with an openpi DROID policy server (robots.franka.policy.droid)."""

    model_config = ConfigDict(extra="forbid")
    # None: what the server's metadata names as `action_space`, else joint_velocity (DROID's).
    action_space: Literal["joint_velocity", "joint_position"] | None = None
    # How each step reaches franky: a joint velocity motion, or an asynchronous joint motion to the
    # step's target; both replaced every step (docs/franka-vla.md has the tracking measured on franky-sim).
    motion: Literal["velocity", "position"] = "velocity"
    control_hz: float = Field(15.0, ge=1.0, le=100.0)
    open_loop_horizon: int = Field(8, ge=1, le=100)
    exterior_camera: str = "front"
    # The wrist camera of each arm (default: "wrist" for one arm, "<arm>_wrist" with several).
    wrist_cameras: dict[str, str] = {}
    grasp_force_n: float = Field(20.0, gt=0, le=140.0)
    connect_timeout_s: float = Field(10.0, gt=0)
    infer_timeout_s: float = Field(30.0, gt=0)

    def wrist_camera(self, arm: str, arm_count: int) -> str:
        return self.wrist_cameras.get(arm, "wrist" if arm_count == 1 else f"{arm}_wrist")


class FrankaConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    arms: list[ArmConfig] = [ArmConfig()]
    # With --sim the simulator's own cameras are used; an entry here with the same name as a
    # simulated camera overrides its extrinsics/intrinsics (e.g. to test a calibration result).
    cameras: list[CameraConfig] = []
    sim_camera_width: int = Field(320, gt=0)
    sim_camera_height: int = Field(240, gt=0)
    safety_file: str | None = str(DEFAULT_SAFETY_FILE)
    # Set from the command line (--approve-motions): overrides require_approval for every arm.
    require_approval: bool | None = None
    # An openpi policy server for run_policy (ws://host:port or wss://); None: no run_policy.
    vla_endpoint: str | None = None
    policy: PolicyConfig = PolicyConfig()

    @field_validator("vla_endpoint")
    @classmethod
    def websocket_endpoint(cls, value: str | None) -> str | None:
        """`vla_endpoint` normalised (ws://host:port), or ValueError naming the rule."""
        if value is None or value == "":
            return None
        from rpent.rpc.transport.vla_endpoint import WebsocketEndpoint, parse_vla_endpoint

        endpoint = parse_vla_endpoint(value)  # EndpointError is a ValueError naming the rule
        if not isinstance(endpoint, WebsocketEndpoint):
            raise ValueError(f"vla_endpoint {value!r}: run_policy speaks openpi's websocket protocol: ws://host:port or wss://host:port")
        return str(endpoint)

    @model_validator(mode="after")
    def _policy_names_known_arms(self) -> FrankaConfig:
        arms = [a.name for a in self.arms]
        unknown = sorted(set(self.policy.wrist_cameras) - set(arms))
        if unknown:
            raise ValueError(f"policy.wrist_cameras: arms {unknown} are not configured; known arms: {arms}")
        return self

    @model_validator(mode="after")
    def _cameras_name_known_arms(self) -> FrankaConfig:
        arms = [a.name for a in self.arms]
        seen: set[str] = set()
        for cam in self.cameras:
            if cam.name in seen:
                raise ValueError(f"cameras: two cameras are named {cam.name!r}")
            seen.add(cam.name)
            if cam.arm is not None and cam.arm not in arms:
                raise ValueError(f"cameras: camera {cam.name!r} names arm {cam.arm!r}; known arms: {arms}")
        return self

    def camera(self, name: str) -> CameraConfig | None:
        return next((c for c in self.cameras if c.name == name), None)

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
