"""Intel RealSense D4xx cameras (D405, D415, D435, D455) through `pyrealsense2`: colour, and depth
aligned to the colour image, in metres, with the colour stream's own calibration.

    pip install 'rpent[realsense]'

A camera is chosen by serial number (`serial` in the robot config; None takes the only one
connected). Instead of a live device it can play back a recording made with the RealSense SDK
(`recording`; in the robot config, the camera's `device` as a path): the same pipeline, alignment and calibration code runs on the recorded frames,
which play at their recorded rate, over and over, as if a camera were filming them.

Depth is aligned to colour by the SDK (`rs.align(rs.stream.color)`): every depth reading is
reprojected into the colour camera with the device's own depth -> colour extrinsics, so pixel
(row, col) of `depth_m` lies under pixel (row, col) of `rgb`, and the colour intrinsics describe
both. Readings the SDK has not got (too near, too far, occluded from the colour camera) are 0.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robots.franka.camera_mount import CameraMount
from rpent.runtime.arm import RuntimeFault
from rpent.runtime.camera import CameraFrame, Intrinsics

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'rpent[realsense]' (pyrealsense2)"
FRAME_TIMEOUT_MS = 5000


def import_pyrealsense2(camera: str) -> Any:
    """The SDK's Python module, or a RuntimeFault naming the extra that installs it."""
    try:
        import pyrealsense2
    except ImportError as exc:
        raise RuntimeFault(f"camera {camera}: kind realsense needs the RealSense SDK: {INSTALL_HINT}") from exc
    return pyrealsense2


def choose_serial(camera: str, requested: str | None, connected: Sequence[str]) -> str:
    """The serial to open: `requested` if it is connected, else the only device connected."""
    listed = ", ".join(connected) if connected else "none"
    if requested is not None:
        if requested not in connected:
            raise RuntimeFault(
                f"camera {camera}: no RealSense with serial {requested!r} is connected (connected: {listed})"
            )
        return requested
    if not connected:
        raise RuntimeFault(f"camera {camera}: no RealSense device is connected")
    if len(connected) > 1:
        raise RuntimeFault(
            f"camera {camera}: {len(connected)} RealSense devices are connected ({listed}); set `serial` to choose one"
        )
    return connected[0]


def opencv_distortion(camera: str, model: str, coeffs: Sequence[float]) -> tuple[float, ...] | None:
    """The RealSense distortion model as OpenCV coefficients (k1, k2, p1, p2, k3); () for none;
    None when OpenCV's model cannot express it (then the pixels cannot be back-projected).

    librealsense's Brown-Conrady and OpenCV's agree in order and meaning; its "modified" variant
    differs only in applying tangential terms to the radially distorted point, well within a
    pixel for the small tangential terms of D4xx colour lenses. "Inverse" Brown-Conrady maps
    distorted to undistorted pixels, the other way round.
    """
    values = tuple(float(c) for c in coeffs)
    if model == "none" or not any(values):
        return ()
    if model in ("brown_conrady", "modified_brown_conrady"):
        return values[:5]
    log.warning(
        "camera %s: the colour stream's %s distortion has no OpenCV equivalent; set `intrinsics` "
        "in the camera config to back-project its pixels",
        camera,
        model,
    )
    return None


class RealSenseCamera:
    """One RealSense: `capture()` gives colour, `capture_frame()` colour + aligned metric depth +
    intrinsics + pose.

    `intrinsics` overrides the device's colour calibration (e.g. from a checkerboard);
    `mount` places the optical frame (fixed: T_base_camera; wrist: T_flange_camera composed with
    the flange pose of `joints()`, read as the frame arrives).
    """

    def __init__(
        self,
        name: str,
        serial: str | None = None,
        width: int = 640,
        height: int = 480,
        fps: float = 30.0,
        *,
        recording: str | Path | None = None,
        intrinsics: Intrinsics | None = None,
        mount: CameraMount | None = None,
        joints: Callable[[], Sequence[float]] | None = None,
        timeout_ms: int = FRAME_TIMEOUT_MS,
    ) -> None:
        rs = import_pyrealsense2(name)
        self._rs = rs
        self.name = name
        self.mount = mount
        self._joints = joints
        self._timeout_ms = timeout_ms
        self._lock = threading.Lock()
        config = rs.config()
        if recording is not None:
            path = Path(recording).expanduser()
            if not path.is_file():
                raise RuntimeFault(
                    f"camera {name}: recording {str(path)!r} is not a file (a live RealSense is chosen by `serial`;"
                    " `device` names a recording to play back)"
                )
            # Every stream of the file, in real time and looping. (SDK 2.59 aborts the process now and
            # then when a looping playback that waits for its reader, set_real_time(False), is stopped.)
            config.enable_device_from_file(str(path), repeat_playback=True)
            source = f"recording {path.name}"
        else:
            connected = [d.get_info(rs.camera_info.serial_number) for d in rs.context().query_devices()]
            serial = choose_serial(name, serial, connected)
            config.enable_device(serial)
            config.enable_stream(rs.stream.color, width, height, rs.format.rgb8, int(fps))
            self._enable_depth(config, width, height, int(fps))
            source = f"RealSense {serial}"
        self.source = source
        self._pipeline = rs.pipeline()
        try:
            profile = self._pipeline.start(config)
        except RuntimeError as exc:
            raise RuntimeFault(
                f"camera {name}: cannot start {source} at {width} x {height} @ {fps:g} fps: {exc}"
            ) from exc
        self._running = True
        try:
            device = profile.get_device()
            self.serial = device.get_info(rs.camera_info.serial_number)
            if recording is not None and serial is not None and serial != self.serial:
                raise RuntimeFault(f"camera {name}: the recording is of RealSense {self.serial}, not serial {serial!r}")
            self.depth_scale_m = float(device.first_depth_sensor().get_depth_scale())
            colour = profile.get_stream(rs.stream.color).as_video_stream_profile()
            self.width, self.height = colour.width(), colour.height()
            self.intrinsics = self._intrinsics(colour.get_intrinsics(), intrinsics)
        except BaseException:
            self.close()
            raise
        self._align = rs.align(rs.stream.color)

    def _enable_depth(self, config: Any, width: int, height: int, fps: int) -> None:
        """Depth at the colour size where the model offers it, else its default size (alignment
        resamples depth to the colour pixels either way)."""
        rs = self._rs
        config.enable_stream(rs.stream.depth, width, height, rs.format.z16, fps)
        if not config.can_resolve(rs.pipeline_wrapper(rs.pipeline())):
            config.disable_stream(rs.stream.depth)
            config.enable_stream(rs.stream.depth, 0, 0, rs.format.z16, fps)

    def _intrinsics(self, device: Any, override: Intrinsics | None) -> Intrinsics | None:
        if override is not None:
            if (override.width, override.height) != (self.width, self.height):
                raise RuntimeFault(
                    f"camera {self.name}: intrinsics are for {override.width} x {override.height} "
                    f"but {self.source} delivers {self.width} x {self.height}"
                )
            return override
        distortion = opencv_distortion(self.name, device.model.name, device.coeffs)
        if distortion is None:
            return None
        return Intrinsics(device.width, device.height, device.fx, device.fy, device.ppx, device.ppy, distortion)

    def _next_frames(self) -> Any:
        # The pipeline queues frames between requests: drop those, so the picture is taken after
        # the request (and after the joints a wrist camera's pose is computed from).
        while self._pipeline.poll_for_frames():
            pass
        ok, frames = self._pipeline.try_wait_for_frames(self._timeout_ms)
        if not ok:
            raise RuntimeFault(f"camera {self.name}: no frame from {self.source} within {self._timeout_ms} ms")
        return frames

    def _stamp_s(self, frames: Any) -> float:
        domain = frames.get_frame_timestamp_domain()
        if domain in (self._rs.timestamp_domain.global_time, self._rs.timestamp_domain.system_time):
            return float(frames.get_timestamp()) / 1000.0  # milliseconds of the host clock
        return time.time()

    def capture(self) -> np.ndarray:
        with self._lock:
            self._check_open()
            colour = self._next_frames().get_color_frame()
            if not colour:
                raise RuntimeFault(f"camera {self.name}: {self.source} sent no colour frame")
            return np.array(colour.get_data(), dtype=np.uint8, copy=True)

    def capture_frame(self) -> CameraFrame:
        with self._lock:
            self._check_open()
            frames = self._next_frames()
            joints = self._joints() if self.mount is not None and self.mount.mount == "wrist" and self._joints else None
            aligned = self._align.process(frames)
            colour, depth = aligned.get_color_frame(), aligned.get_depth_frame()
            if not colour or not depth:
                raise RuntimeFault(
                    f"camera {self.name}: {self.source} sent no {'colour' if not colour else 'depth'} frame"
                )
            rgb = np.array(colour.get_data(), dtype=np.uint8, copy=True)
            depth_m = np.asarray(depth.get_data(), dtype=np.uint16).astype(np.float32) * np.float32(self.depth_scale_m)
            stamp = self._stamp_s(frames)
        return CameraFrame(
            camera=self.name,
            rgb=rgb,
            depth_m=depth_m,
            intrinsics=self.intrinsics,
            T_base_camera=self._pose(joints),
            base_frame=self.mount.base_frame if self.mount is not None else "",
            stamp_s=stamp,
            info={
                "mount": self.mount.mount if self.mount is not None else "fixed",
                "serial": self.serial,
                "depth_scale_m": self.depth_scale_m,
            },
        )

    def _pose(self, joints: Sequence[float] | None) -> np.ndarray | None:
        mount = self.mount
        if mount is None or not mount.calibrated:
            return None
        if mount.mount == "fixed":
            return mount.pose()
        return None if joints is None else mount.pose(joints)

    def _check_open(self) -> None:
        if not self._running:
            raise RuntimeFault(f"camera {self.name}: closed")

    def close(self) -> None:
        with self._lock:
            if getattr(self, "_running", False):
                self._running = False
                try:
                    self._pipeline.stop()
                except RuntimeError as exc:  # already stopped by a device that vanished
                    log.warning("camera %s: stopping %s: %s", self.name, getattr(self, "source", "pipeline"), exc)
