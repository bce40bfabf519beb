"""Two `Camera` implementations: OpenCV capture for USB/UVC cameras (colour only), and offscreen
MuJoCo rendering of the franky-sim scene (colour plus metric depth, exact intrinsics and pose).

`capture()` is the colour-only path (video, dashboard, ROS image topics); `capture_frame()` is what
back-projection needs: one `CameraFrame` whose colour, depth and pose belong to the same instant.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from robots.franka.camera_mount import CameraMount, fovy_intrinsics, translation
from robots.franka.config import CameraConfig
from rpent.runtime.arm import RuntimeFault
from rpent.runtime.camera import CameraFrame, Intrinsics
from rpent.runtime.gl_thread import on_gl_thread

if TYPE_CHECKING:
    from robots.franka.sim.simulator import FrankaSim

log = logging.getLogger(__name__)


def configured_intrinsics(config: CameraConfig | None) -> Intrinsics | None:
    """The config's intrinsics (valid at its width x height), or None if it gives none."""
    if config is None or config.intrinsics is None:
        return None
    k = config.intrinsics
    return Intrinsics(config.width, config.height, k.fx, k.fy, k.cx, k.cy, tuple(k.distortion))


class OpenCVCamera:
    """A USB/UVC camera through OpenCV; `device` is an index (0) or a path (/dev/video2)."""

    def __init__(
        self,
        name: str,
        device: int | str,
        width: int = 640,
        height: int = 480,
        fps: float = 30.0,
        *,
        intrinsics: Intrinsics | None = None,
        mount: CameraMount | None = None,
        joints: Callable[[], Sequence[float]] | None = None,
    ) -> None:
        """`intrinsics` and `mount` come from the config (calibration); `joints` reads the measured
        joints of the mount's arm, for a wrist camera's pose at capture time."""
        import cv2

        self._cv2 = cv2
        self.name = name
        self.device = device
        self._lock = threading.Lock()
        self._cap = cv2.VideoCapture(device)
        if not self._cap.isOpened():
            raise RuntimeFault(f"camera {name}: cannot open device {device!r}")
        self._cap.set(cv2.CAP_PROP_FRAME_WIDTH, width)
        self._cap.set(cv2.CAP_PROP_FRAME_HEIGHT, height)
        self._cap.set(cv2.CAP_PROP_FPS, fps)
        # The driver may pick the nearest supported mode; report what it actually delivers.
        self.width = int(self._cap.get(cv2.CAP_PROP_FRAME_WIDTH)) or width
        self.height = int(self._cap.get(cv2.CAP_PROP_FRAME_HEIGHT)) or height
        if intrinsics is not None and (intrinsics.width, intrinsics.height) != (self.width, self.height):
            # Calibrated at another size: those numbers do not describe these pixels.
            log.warning(
                "camera %s: intrinsics are for %d x %d but the device delivers %d x %d; ignoring them",
                name, intrinsics.width, intrinsics.height, self.width, self.height,
            )
            intrinsics = None
        self.intrinsics = intrinsics
        self.mount = mount
        self._joints = joints

    def capture_frame(self) -> CameraFrame:
        """Colour with the configured calibration; no depth (a UVC camera has none)."""
        mount, pose = self.mount, None
        if mount is not None and mount.calibrated:
            if mount.mount == "fixed":
                pose = mount.pose()
            elif self._joints is not None:
                pose = mount.pose(self._joints())  # measured just before the exposure
        stamp = time.time()
        rgb = self.capture()
        return CameraFrame(
            camera=self.name,
            rgb=rgb,
            depth_m=None,
            intrinsics=self.intrinsics,
            T_base_camera=pose,
            base_frame=mount.base_frame if mount is not None else "",
            stamp_s=stamp,
            info={"mount": mount.mount if mount is not None else "fixed"},
        )

    def capture(self) -> np.ndarray:
        with self._lock:
            ok, frame = self._cap.read()
        if not ok or frame is None:
            raise RuntimeFault(f"camera {self.name}: no frame from device {self.device!r}")
        if frame.ndim == 2:
            frame = self._cv2.cvtColor(frame, self._cv2.COLOR_GRAY2RGB)
        else:
            frame = self._cv2.cvtColor(frame, self._cv2.COLOR_BGR2RGB)
        return np.ascontiguousarray(frame, dtype=np.uint8)

    def close(self) -> None:
        with self._lock:
            self._cap.release()


def sim_camera_mount(
    sim: FrankaSim, camera: str, arm_names: Sequence[str], config: CameraConfig | None = None
) -> tuple[CameraMount, int]:
    """The mount of a simulated camera and the index of its arm: exact from the model (a camera on a
    hand is a wrist camera of that arm, one in the world is fixed in the base of `config.arm` or
    the first arm), unless `config` gives a transform (e.g. a calibration result to try)."""
    import mujoco

    from robots.franka.sim.world import MUJOCO_TO_OPTICAL, wrist_camera_on_flange

    model = sim.model
    cam_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
    if cam_id < 0:
        raise RuntimeFault(f"camera {camera!r} is not in the simulated scene")
    if int(model.cam_bodyid[cam_id]) != 0:
        arm_index, on_flange = wrist_camera_on_flange(model, camera)
        if arm_index >= len(arm_names):
            raise ValueError(f"camera {camera!r} is on arm {arm_index}'s hand, but only {list(arm_names)} are named")
        if config is not None and config.mount != "wrist":
            raise ValueError(f"cameras: {camera!r} is on arm {arm_names[arm_index]!r}'s hand in the simulator: mount: wrist")
        override = config.transform() if config is not None else None
        return CameraMount("wrist", arm_names[arm_index], on_flange if override is None else override), arm_index
    if config is not None and config.mount != "fixed":
        raise ValueError(f"cameras: {camera!r} is fixed in the simulated world: mount: fixed")
    arm = (config.arm if config is not None else None) or arm_names[0]
    arm_index = list(arm_names).index(arm)
    override = config.transform() if config is not None else None
    if override is None:
        rotation = np.zeros(9)
        mujoco.mju_quat2Mat(rotation, model.cam_quat[cam_id])
        world = np.eye(4)
        world[:3, :3] = rotation.reshape(3, 3)
        world[:3, 3] = model.cam_pos[cam_id]
        override = translation(-sim.arm_position(arm_index)) @ world @ MUJOCO_TO_OPTICAL
    return CameraMount("fixed", arm, override), arm_index


class MujocoCamera:
    """Renders one named camera of a running FrankaSim offscreen (EGL).

    Only the scene update holds the simulator lock; rendering runs outside it so physics keeps
    stepping. Every camera renders on the process's one GL thread (rpent.runtime.gl_thread): a
    context belongs to the thread that made it, and two threads rendering at once crash Mesa.

    `capture_frame()` renders colour and depth from the same scene update (so they are aligned and
    of one instant) with the exact pinhole intrinsics of the model's field of view. Its pose is the
    mount's (`sim_camera_mount`): fixed cameras' T_base_camera; for a wrist camera the flange pose
    of the joints read in that same scene update, composed with T_flange_camera. `arm_names` name
    the scene's arms in order (the frames poses are given in); `config` may override intrinsics
    and transforms.
    """

    def __init__(
        self,
        sim: FrankaSim,
        camera: str,
        width: int = 320,
        height: int = 240,
        *,
        arm_names: Sequence[str] = ("arm",),
        config: CameraConfig | None = None,
    ) -> None:
        os.environ.setdefault("MUJOCO_GL", "egl")
        import mujoco

        cam_id = mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if cam_id < 0:
            raise RuntimeFault(f"camera {camera!r} is not in the simulated scene")
        if float(sim.model.cam_sensorsize[cam_id].max()) > 0:
            raise RuntimeFault(f"camera {camera!r}: sensor-size cameras are not supported; give it a fovy")
        self._mujoco = mujoco
        self.name = camera
        self.width = width
        self.height = height
        intrinsics = configured_intrinsics(config)
        if intrinsics is not None and (intrinsics.width, intrinsics.height) != (width, height):
            raise ValueError(
                f"cameras: {camera!r} intrinsics are for {intrinsics.width} x {intrinsics.height}"
                f" but the simulator renders {width} x {height} (set width/height to match)"
            )
        self.intrinsics = intrinsics or fovy_intrinsics(float(sim.model.cam_fovy[cam_id]), width, height)
        self.mount, arm_index = sim_camera_mount(sim, camera, arm_names, config)
        self._qpos = sim._arm_qpos_addresses(arm_index) if self.mount.mount == "wrist" else None
        # Depth at or beyond the far clipping plane is background, not a reading.
        self._far_m = float(sim.model.vis.map.zfar * sim.model.stat.extent) * 0.999
        self._sim = sim
        self._lock = threading.Lock()
        self._renderer: Any = None
        on_gl_thread(self._open)

    def _open(self) -> None:
        self._renderer = self._mujoco.Renderer(self._sim.model, self.height, self.width)

    def _render(self) -> np.ndarray:
        with self._sim.lock:
            self._renderer.update_scene(self._sim.data, camera=self.name)
        return self._renderer.render().copy()

    def _render_frame(self) -> CameraFrame:
        with self._sim.lock:
            data = self._sim.data
            self._renderer.update_scene(data, camera=self.name)
            stamp = time.time()
            joints = data.qpos[self._qpos].copy() if self._qpos is not None else None
        rgb = self._renderer.render().copy()
        self._renderer.enable_depth_rendering()
        try:
            depth = self._renderer.render().astype(np.float32, copy=True)
        finally:
            self._renderer.disable_depth_rendering()
        depth[depth >= self._far_m] = 0.0
        return CameraFrame(
            camera=self.name,
            rgb=rgb,
            depth_m=depth,
            intrinsics=self.intrinsics,
            T_base_camera=self.mount.pose(joints),
            base_frame=self.mount.base_frame,
            stamp_s=stamp,
            info={"mount": self.mount.mount},
        )

    def capture(self) -> np.ndarray:
        with self._lock:
            if self._renderer is None:
                raise RuntimeFault(f"camera {self.name}: closed")
            return on_gl_thread(self._render)

    def capture_frame(self) -> CameraFrame:
        with self._lock:
            if self._renderer is None:
                raise RuntimeFault(f"camera {self.name}: closed")
            return on_gl_thread(self._render_frame)

    def close(self) -> None:
        with self._lock:
            if self._renderer is not None:
                on_gl_thread(self._renderer.close)
                self._renderer = None
