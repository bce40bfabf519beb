"""The Franka runtime a toolkit drives: arms, grippers, cameras, and the simulator if any.

`build_runtime(config, sim=True)` starts franky-sim in this process and points the very same
franky clients at it; without `sim` they connect to the hosts in the config.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from robots.franka.camera_mount import CameraMount
from robots.franka.cameras import MujocoCamera, OpenCVCamera, configured_intrinsics
from robots.franka.config import ArmConfig, CameraConfig, FrankaConfig
from robots.franka.hardware.connect import RobotLink
from robots.franka.hardware.franky_arm import FrankyArm
from robots.franka.hardware.franky_gripper import FrankyGripper
from robots.franka.safety import SafetyConfig, SafetyEnvelope
from rpent.runtime.arm import ApprovalChannel, RuntimeFault
from rpent.runtime.camera import Camera

if TYPE_CHECKING:  # franky-sim and MuJoCo are only needed with --sim
    from robots.franka.sim.simulator import FrankaSim, SimScene

log = logging.getLogger(__name__)


@dataclass
class FrankaRuntime:
    arms: dict[str, FrankyArm]
    grippers: dict[str, FrankyGripper]
    cameras: list[Camera]
    arm_configs: dict[str, ArmConfig]
    safety: SafetyConfig
    sim: FrankaSim | None = None
    approval: ApprovalChannel | None = None
    # Frames per second of the episode video during motions, every camera tiled in each frame (0: none).
    video_fps: float = 0.0
    # While the record's stream samples the cameras (robots.franka.recording): its newest pictures, which the
    # episode video takes instead of rendering every camera a second time.
    frame_tap: Callable[[], dict[str, Any] | None] | None = None
    # Per arm, the openpi policy run_policy drives it with (robots.franka.policy.loop); none without vla_endpoint.
    policies: dict[str, Any] = field(default_factory=dict)
    # Motions planned again after franky's trajectory generator gave up (robots.franka.motion): a recovery
    # for real arms under load, never needed in simulation, where the clock waits for the client.
    replans: int = field(default=0, init=False)
    closed: bool = field(default=False, init=False)

    def arm(self, name: str | None = None) -> FrankyArm:
        if name is None:
            return next(iter(self.arms.values()))
        try:
            return self.arms[name]
        except KeyError:
            raise ValueError(f"arm: unknown arm {name!r}; known: {sorted(self.arms)}") from None

    def gripper(self, name: str | None = None) -> FrankyGripper:
        arm_name = self.arm(name).name
        if arm_name not in self.grippers:
            raise ValueError(f"arm {arm_name!r} has no gripper configured")
        return self.grippers[arm_name]

    def policy(self, name: str | None = None) -> Any:
        arm_name = self.arm(name).name
        if arm_name not in self.policies:
            raise ValueError(f"arm {arm_name!r}: no VLA policy server configured (vla_endpoint: ws://host:port, "
                             "or --vla-endpoint)")
        return self.policies[arm_name]

    def stop_all(self) -> None:
        """Stop every arm, and every gripper that is moving (a held object stays held).

        Every device is told to stop even if one fails; then a RuntimeFault names each failure.
        """
        failures = []
        for arm in self.arms.values():
            try:
                arm.stop()
            except Exception as exc:
                failures.append(str(exc))
        grippers = list(self.grippers.values())
        for gripper in grippers:
            gripper.stop()  # a no-op unless a gripper command runs
        for gripper in grippers:
            try:
                gripper.confirm_stopped()
            except Exception as exc:
                failures.append(str(exc))
        if failures:
            raise RuntimeFault("stop failed: " + "; ".join(failures))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        log.info("motions planned again after franky's trajectory generator gave up: %d", self.replans)
        if self.sim is not None:
            log.info("franky-sim: times a moving arm's client fell so far behind that the simulation ran on "
                     "without it: %d", self.sim.clients_left_behind)
            log.info("franky-sim: motions finished while the arm still moved (a real arm's reflex): %d",
                     self.sim.finishes_refused)
        for policy in self.policies.values():
            _quietly(policy.close)
        for cam in self.cameras:
            _quietly(cam.close)
        for gripper in self.grippers.values():
            _quietly(gripper.close)
        for arm in self.arms.values():
            _quietly(arm.close)
        if self.sim is not None:
            _quietly(self.sim.close)


def _quietly(fn: object) -> None:
    try:
        fn()  # type: ignore[operator]
    except Exception:
        log.exception("closing %r failed", fn)


def sim_cameras_of(simulator: FrankaSim, config: FrankaConfig, arm_names: list[str]) -> list[Camera]:
    """The simulated cameras, fixed ones first, then the wrist cameras; a config entry of the same
    name may override a camera's intrinsics or transform (its device settings do not apply)."""
    names = [c.name for c in simulator.scene.cameras] + [c.name for c in simulator.scene.wrist_cameras]
    cameras: list[Camera] = []
    try:
        for name in names:
            cameras.append(
                MujocoCamera(
                    simulator, name, config.sim_camera_width, config.sim_camera_height,
                    arm_names=arm_names, config=config.camera(name),
                )
            )
    except BaseException:
        for cam in cameras:
            _quietly(cam.close)
        raise
    return cameras


def device_camera(
    cam: CameraConfig, first_arm: str, joints_of: Callable[[str], Callable[[], Sequence[float]]]
) -> Camera:
    """A real camera from its config, with its calibration: intrinsics and its mount on an arm
    (`cam.arm`, else `first_arm`); `joints_of(arm)` reads that arm's measured joints (wrist cameras)."""
    arm = cam.arm or first_arm
    mount = CameraMount(cam.mount, arm, cam.transform())
    intrinsics = configured_intrinsics(cam)
    if cam.kind == "realsense":
        try:
            from robots.franka.hardware.realsense import RealSenseCamera
        except ImportError as exc:
            raise RuntimeFault(f"camera {cam.name}: kind realsense is not available ({exc})") from None
        # A RealSense is chosen by serial; a `device` path names a recording to play back instead.
        return RealSenseCamera(
            cam.name, cam.serial, cam.width, cam.height, cam.fps,
            recording=cam.device if isinstance(cam.device, str) else None,
            intrinsics=intrinsics, mount=mount, joints=joints_of(arm),
        )
    return OpenCVCamera(
        cam.name, cam.device, cam.width, cam.height, cam.fps,
        intrinsics=intrinsics, mount=mount, joints=joints_of(arm),
    )


def _joints_of(runtime: FrankaRuntime, arm: str) -> Callable[[], Sequence[float]]:
    """The measured joints of `arm`, read when a wrist camera takes a picture (arms connect first)."""
    return lambda: runtime.arms[arm].state().joints


def build_runtime(
    config: FrankaConfig,
    *,
    sim: bool = False,
    scene: SimScene | None = None,
    sim_cameras: bool = True,
    approval: ApprovalChannel | None = None,
    sim_seed: int | None = None,
    sim_hosts: Sequence[str] | None = None,
) -> FrankaRuntime:
    """Connect everything in `config`; with `sim`, start franky-sim first and use its hosts.

    `sim_seed` places the scene's objects at random (robots.franka.sim.scene_layout), reachable within
    this config's safety envelopes; None keeps the fixed scene. `sim_hosts` are the loopback
    addresses franky-sim may bind (busy ones skipped; default 127.0.0.1 on).
    """
    safety = config.safety()
    simulator: FrankaSim | None = None
    arm_cfgs = list(config.arms)
    if sim_seed is not None and not sim:
        raise ValueError("sim_seed: only with sim (a random scene exists only in the simulator)")
    if sim:
        simulator, arm_cfgs = _start_sim(config, safety, arm_cfgs, scene, sim_seed, sim_hosts)
    runtime = FrankaRuntime(
        arms={},
        grippers={},
        cameras=[],
        arm_configs={c.name: c for c in arm_cfgs},
        safety=safety,
        sim=simulator,
        approval=approval,
    )
    try:
        for cfg in arm_cfgs:
            _connect_arm(runtime, cfg, safety.envelope(cfg.name, cfg.base_xyz_m))
        if simulator is not None and sim_cameras:
            runtime.cameras.extend(sim_cameras_of(simulator, config, [cfg.name for cfg in arm_cfgs]))
        elif simulator is None:
            first_arm = next(iter(runtime.arm_configs))
            runtime.cameras.extend(
                device_camera(cam, first_arm, lambda arm: _joints_of(runtime, arm)) for cam in config.cameras
            )
        if config.vla_endpoint:
            from robots.franka.policy.client import connect_policies

            runtime.policies = connect_policies(config, runtime.arms, runtime.grippers, runtime.cameras)
    except BaseException:
        runtime.close()
        raise
    if not runtime.arms:
        runtime.close()
        raise RuntimeFault("no arms configured")
    return runtime


def _start_sim(config: FrankaConfig, safety: SafetyConfig, arm_cfgs: list[ArmConfig], scene: SimScene | None,
               sim_seed: int | None, sim_hosts: Sequence[str] | None = None) -> tuple[FrankaSim, list[ArmConfig]]:
    """Start franky-sim with the scene (random with `sim_seed`); the arm configs pointed at its hosts."""
    from robots.franka.sim.simulator import FrankaSim, SimScene

    if scene is None:
        scene = SimScene() if len(arm_cfgs) == 1 else SimScene.dual()
    if len(scene.arm_positions) != len(arm_cfgs):
        raise ValueError(f"arms: the sim scene has {len(scene.arm_positions)} arms, the config {len(arm_cfgs)}")
    if sim_seed is not None:
        from robots.franka.sim.scene_layout import random_scene

        scene = random_scene(
            sim_seed, scene,
            [safety.envelope(cfg.name, pos) for cfg, pos in zip(arm_cfgs, scene.arm_positions, strict=True)],
            [cfg.home_joints_rad for cfg in arm_cfgs],
            image_aspect=config.sim_camera_width / config.sim_camera_height,
        )
    simulator = FrankaSim(scene, hostnames=sim_hosts).start()
    log.info("franky-sim: arms at %s", ", ".join(simulator.hosts))
    # The simulated scene is the truth of where each arm stands.
    return simulator, [
        cfg.model_copy(update={"host": host, "base_xyz_m": tuple(position), "realtime": None})
        for cfg, host, position in zip(arm_cfgs, simulator.hosts, scene.arm_positions, strict=False)
    ]


def _connect_arm(runtime: FrankaRuntime, cfg: ArmConfig, envelope: SafetyEnvelope) -> None:
    """The arm of `cfg` and, if it has one, its hand, into `runtime`."""
    link = RobotLink(cfg.host)  # the arm and its hand notice a vanished robot together
    runtime.arms[cfg.name] = FrankyArm(
        cfg.host,
        name=cfg.name,
        envelope=envelope,
        dynamics_factor=cfg.dynamics_factor,
        torque_threshold_nm=cfg.torque_threshold_nm,
        force_threshold_n=cfg.force_threshold_n,
        connect_timeout_s=cfg.connect_timeout_s,
        link=link,
        realtime=cfg.realtime,
    )
    if cfg.gripper:
        runtime.grippers[cfg.name] = FrankyGripper(
            cfg.host,
            name=f"{cfg.name}_gripper",
            envelope=envelope,
            speed_m_s=cfg.gripper_speed_m_s,
            connect_timeout_s=cfg.connect_timeout_s,
            link=link,
        )
