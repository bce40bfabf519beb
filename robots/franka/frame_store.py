"""The frames behind the images a model was shown, kept per observation step for `back_project`.

A *step* is the id of the tool call whose result carried the images (the `step` of each entry of
`cameras` in that result; call ids count from 1 in each run segment). For every camera of a step
the store keeps what turns a pixel of that very image into a point: depth, intrinsics and the
camera pose at capture time. The newest `keep` steps stay in memory; with an output directory every
step's depth is also written once to `depth/<image stem>.npz` beside `images/` (the PNG's name with
.npz; depth in 0.1 mm steps), so steps that dropped out of memory are read back from disk, and the run record holds them.
"""

from __future__ import annotations

import io
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rpent.record.images import image_file_name, image_labels
from rpent.runtime.camera import CameraFrame, Intrinsics

DEPTH_FOLDER = "depth"
KEEP_STEPS = 16
# Depth on disk: 16-bit integers of a tenth of a millimetre (what a D4xx's finest depth unit gives).
DEPTH_UNIT_M = 0.0001


@dataclass(frozen=True)
class StoredFrame:
    """One camera's frame of one step, without its colour (the PNG the model saw is in the result)."""

    camera: str
    step: int
    width: int
    height: int
    depth_m: np.ndarray | None
    intrinsics: Intrinsics | None
    T_base_camera: np.ndarray | None
    base_frame: str
    stamp_s: float

    @property
    def can_back_project(self) -> bool:
        return self.depth_m is not None and self.intrinsics is not None and self.T_base_camera is not None

    def describe(self) -> dict[str, Any]:
        """What a model is told about the image (the entry of `cameras` in results)."""
        return {
            "name": self.camera,
            "width": self.width,
            "height": self.height,
            "depth": self.depth_m is not None,
            "back_project": self.can_back_project,
            "step": self.step,
        }


@dataclass(frozen=True)
class _Index:
    """What stays of a step once its depth left memory: where to read it back."""

    frame: StoredFrame  # depth_m None when evicted
    path: Path | None
    evicted: bool = False


class FrameStore:
    """Thread-safe: observations record while read-only `back_project` calls read."""

    def __init__(
        self, folder: Path | None = None, file_name: Callable[[str], str] = lambda name: name, keep: int = KEEP_STEPS
    ) -> None:
        self._folder = folder
        self._file_name = file_name
        self._keep = keep
        self._lock = threading.Lock()
        self._steps: OrderedDict[int, dict[str, _Index]] = OrderedDict()
        self._in_memory: OrderedDict[int, None] = OrderedDict()

    def record(self, step: int, tool: str, frames: Sequence[CameraFrame]) -> list[dict[str, Any]]:
        """Keep `frames` (the images of call `step` of `tool`, one per camera) and return their
        descriptions, in the same order; depth files are named as the toolkit names the PNGs."""
        stored = {}
        labels = image_labels([frame.camera for frame in frames], len(frames))
        for frame, label in zip(frames, labels, strict=True):
            kept = StoredFrame(
                camera=frame.camera,
                step=step,
                width=frame.width,
                height=frame.height,
                depth_m=frame.depth_m,
                intrinsics=frame.intrinsics,
                T_base_camera=None if frame.T_base_camera is None else np.array(frame.T_base_camera, dtype=float),
                base_frame=frame.base_frame,
                stamp_s=frame.stamp_s,
            )
            path = None
            if self._folder is not None and kept.depth_m is not None:
                stem = Path(self._file_name(image_file_name(step, tool, label))).stem
                path = self._folder / f"{stem}.npz"
                _write_new(path, _npz_bytes(kept))
            stored[kept.camera] = _Index(kept, path)
        with self._lock:
            self._steps[step] = stored
            self._in_memory[step] = None
            while len(self._in_memory) > self._keep:
                old, _ = self._in_memory.popitem(last=False)
                self._steps[old] = {
                    name: _Index(_without_depth(entry.frame), entry.path, entry.frame.depth_m is not None)
                    for name, entry in self._steps[old].items()
                }
        return [entry.frame.describe() for entry in stored.values()]

    def latest_step(self, camera: str) -> int | None:
        with self._lock:
            steps = [s for s, cams in self._steps.items() if camera in cams]
        return max(steps) if steps else None

    def steps(self) -> list[int]:
        with self._lock:
            return sorted(self._steps)

    def cameras(self) -> list[str]:
        with self._lock:
            return sorted({name for cams in self._steps.values() for name in cams})

    def get(self, camera: str, step: int) -> StoredFrame:
        """The frame of `camera` at `step` (-1: its latest); KeyError naming what is known."""
        if step == -1:
            latest = self.latest_step(camera)
            if latest is None:
                known = self.cameras()
                if known:
                    raise KeyError(f"camera: no image of camera {camera!r} was shown yet; cameras with images: {known}")
                raise KeyError("step: no images were shown yet (move, or call capture_images, first)")
            step = latest
        with self._lock:
            cams = self._steps.get(step)
            entry = None if cams is None else cams.get(camera)
        if cams is None:
            recent = self.steps()[-8:]
            raise KeyError(f"step: no observation step {step} (a step is the call id of a result with images; recent: {recent})")
        if entry is None:
            raise KeyError(f"camera: step {step} has no image of camera {camera!r}; it has {sorted(cams)}")
        if not entry.evicted:
            return entry.frame
        if entry.path is None:
            raise KeyError(
                f"step: step {step}'s depth is no longer kept (the newest {self._keep} steps are;"
                " with an output directory every step's depth stays on disk); take a new picture"
            )
        with np.load(entry.path) as saved:
            return _with_depth(entry.frame, units_to_depth(saved["depth"]))


def _without_depth(frame: StoredFrame) -> StoredFrame:
    return _with_depth(frame, None)


def _with_depth(frame: StoredFrame, depth: np.ndarray | None) -> StoredFrame:
    return StoredFrame(
        frame.camera, frame.step, frame.width, frame.height, depth, frame.intrinsics, frame.T_base_camera,
        frame.base_frame, frame.stamp_s,
    )  # fmt: skip


def depth_to_units(depth_m: np.ndarray) -> np.ndarray:
    """uint16 in DEPTH_UNIT_M; no reading (0, NaN) and anything beyond the range become 0."""
    units = np.nan_to_num(np.asarray(depth_m, dtype=np.float64) / DEPTH_UNIT_M, nan=0.0, posinf=0.0, neginf=0.0)
    units = np.rint(units)
    units[(units < 0) | (units > 65535)] = 0
    return units.astype(np.uint16)


def units_to_depth(units: np.ndarray) -> np.ndarray:
    return units.astype(np.float32) * np.float32(DEPTH_UNIT_M)


def _npz_bytes(frame: StoredFrame) -> bytes:
    """Everything back_project needs, self-describing: depth as uint16 in `depth_unit_m` (0.1 mm; 0 = no
    reading; range 6.55 m), K and distortion, the optical frame's pose (OpenCV convention) and the
    frame it is in. Compressed integers: a few KiB and milliseconds per image, where float32 costs
    ten times both."""
    k = frame.intrinsics
    buffer = io.BytesIO()
    np.savez_compressed(
        buffer,
        depth=depth_to_units(frame.depth_m),
        depth_unit_m=np.array(DEPTH_UNIT_M),
        K=k.matrix() if k is not None else np.full((3, 3), np.nan),
        distortion=np.asarray(k.distortion if k is not None else (), dtype=float),
        T_base_camera=frame.T_base_camera if frame.T_base_camera is not None else np.full((4, 4), np.nan),
        base_frame=np.array(frame.base_frame),
        camera=np.array(frame.camera),
        step=np.array(frame.step),
        stamp_s=np.array(frame.stamp_s),
    )
    return buffer.getvalue()


def _write_new(path: Path, payload: bytes) -> None:
    """Create the file; never replace one (the run record only grows)."""
    path.parent.mkdir(exist_ok=True)
    with open(path, "xb") as handle:
        handle.write(payload)
