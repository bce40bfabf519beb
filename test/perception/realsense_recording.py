"""A RealSense recording made without a device: the SDK's software device renders a known scene
(a wall with a box in front of it) through a depth camera and a colour camera a baseline apart,
and the SDK's recorder writes it, so playback runs the real pipeline, alignment and calibration
code on frames whose truth is known.

The scene, in the colour camera's optical frame (x right, y down, z forward): a wall at
z = WALL_Z_M and a box face at z = BOX_Z_M covering x in BOX_X_M, y in BOX_Y_M. The depth camera
sits BASELINE_M to the colour camera's left (at x = -BASELINE_M), as on a D4xx.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

WALL_Z_M = 1.0
BOX_Z_M = 0.6
BOX_X_M = (-0.02, 0.08)
BOX_Y_M = (-0.05, 0.05)
BASELINE_M = 0.025
RED = (220, 30, 30)
GREY = (128, 128, 128)


@dataclass(frozen=True)
class Lens:
    width: int
    height: int
    fx: float
    fy: float
    ppx: float
    ppy: float
    model: str = "brown_conrady"
    coeffs: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0)

    def rays(self) -> tuple[np.ndarray, np.ndarray]:
        """x/z and y/z of every pixel centre (no distortion)."""
        cols, rows = np.meshgrid(np.arange(self.width), np.arange(self.height))
        return (cols - self.ppx) / self.fx, (rows - self.ppy) / self.fy


@dataclass(frozen=True)
class Recording:
    path: Path
    serial: str
    depth: Lens
    colour: Lens
    depth_units_m: float
    rgb: np.ndarray = field(repr=False)


def _box_hit(x_over_z: np.ndarray, y_over_z: np.ndarray, x_offset_m: float) -> np.ndarray:
    """Rays (in a camera at x = x_offset_m of the colour frame) that meet the box face."""
    x = x_over_z * BOX_Z_M + x_offset_m
    y = y_over_z * BOX_Z_M
    return (x >= BOX_X_M[0]) & (x <= BOX_X_M[1]) & (y >= BOX_Y_M[0]) & (y <= BOX_Y_M[1])


def render_colour(lens: Lens) -> np.ndarray:
    rx, ry = lens.rays()
    rgb = np.empty((lens.height, lens.width, 3), np.uint8)
    rgb[...] = GREY
    rgb[_box_hit(rx, ry, 0.0)] = RED
    return rgb


def render_depth_m(lens: Lens) -> np.ndarray:
    """z of what the depth camera sees, per pixel (metres)."""
    rx, ry = lens.rays()
    return np.where(_box_hit(rx, ry, -BASELINE_M), BOX_Z_M, WALL_Z_M)


def _intrinsics(rs, lens: Lens):
    k = rs.intrinsics()
    k.width, k.height, k.fx, k.fy, k.ppx, k.ppy = lens.width, lens.height, lens.fx, lens.fy, lens.ppx, lens.ppy
    k.model = getattr(rs.distortion, lens.model)
    k.coeffs = list(lens.coeffs)
    return k


def _stream(rs, kind, uid: int, lens: Lens, fmt, bpp: int, fps: int):
    stream = rs.video_stream()
    stream.type, stream.index, stream.uid = kind, 0, uid
    stream.width, stream.height, stream.fps, stream.bpp, stream.fmt = lens.width, lens.height, fps, bpp, fmt
    stream.intrinsics = _intrinsics(rs, lens)
    return stream


def record(
    path: Path,
    *,
    serial: str = "123622270001",
    depth: Lens = Lens(128, 96, 100.0, 100.0, 63.5, 47.5),
    colour: Lens = Lens(160, 120, 140.0, 141.0, 80.2, 59.7),
    depth_units_m: float = 0.0001,
    frames: int = 3,
    fps: int = 30,
) -> Recording:
    """Write a recording (the SDK wants a .db3 name) of `frames` identical frames of the scene."""
    import pyrealsense2 as rs

    device = rs.software_device()
    device.register_info(rs.camera_info.serial_number, serial)
    device.register_info(rs.camera_info.name, "Intel RealSense D435 (synthetic)")
    depth_sensor, colour_sensor = device.add_sensor("Stereo Module"), device.add_sensor("RGB Camera")
    depth_profile = depth_sensor.add_video_stream(_stream(rs, rs.stream.depth, 0, depth, rs.format.z16, 2, fps), True)
    depth_sensor.add_read_only_option(rs.option.depth_units, depth_units_m)
    colour_profile = colour_sensor.add_video_stream(
        _stream(rs, rs.stream.color, 1, colour, rs.format.rgb8, 3, fps), True
    )
    to_colour = rs.extrinsics()
    to_colour.rotation = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    to_colour.translation = [-BASELINE_M, 0.0, 0.0]  # p_colour = p_depth - (colour origin in the depth frame)
    depth_profile.register_extrinsics_to(colour_profile, to_colour)
    device.create_matcher(rs.matchers.dlr_c)

    z16 = np.round(render_depth_m(depth) / depth_units_m).astype(np.uint16)
    rgb = render_colour(colour)
    recorder = rs.recorder(str(path), device)
    sensors = recorder.query_sensors()
    arrived = threading.Semaphore(0)
    for sensor, profile in zip(sensors, (depth_profile, colour_profile), strict=True):
        sensor.open(profile)
        sensor.start(lambda _frame: arrived.release())
    # The recorder stamps each frame with its arrival, so frames are sent at the stream's rate: a
    # recording whose frames all arrived at once plays back in microseconds.
    pace = threading.Event()
    for number in range(frames):
        if number:
            pace.wait(1.0 / fps)
        stamp_ms = 1000.0 + number * 1000.0 / fps
        for sensor, profile, pixels, bpp in (
            (depth_sensor, depth_profile, z16, 2),
            (colour_sensor, colour_profile, rgb, 3),
        ):
            frame = rs.software_video_frame()
            frame.pixels, frame.stride, frame.bpp = pixels, pixels.shape[1] * bpp, bpp
            frame.timestamp, frame.domain, frame.frame_number = stamp_ms, rs.timestamp_domain.hardware_clock, number
            frame.profile = profile.as_video_stream_profile()
            sensor.on_video_frame(frame)
    # The recorder writes a frame as it passes through to the callback: wait for them all.
    for _ in range(2 * frames):
        assert arrived.acquire(timeout=10), "the software device did not deliver its frames"
    for sensor in sensors:
        sensor.stop()
        sensor.close()
    del sensors, recorder  # the recorder finishes the file when the last reference goes
    return Recording(path, serial, depth, colour, depth_units_m, rgb)
