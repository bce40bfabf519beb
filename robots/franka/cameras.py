"""Two `Camera` implementations: OpenCV capture for USB/UVC cameras, and offscreen MuJoCo
rendering of the franky-sim scene."""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from rpent.runtime.arm import RuntimeFault

if TYPE_CHECKING:
    from robots.franka.sim import FrankaSim


class OpenCVCamera:
    """A USB/UVC camera through OpenCV; `device` is an index (0) or a path (/dev/video2)."""

    def __init__(self, name: str, device: int | str, width: int = 640, height: int = 480, fps: float = 30.0) -> None:
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


class MujocoCamera:
    """Renders one named camera of a running FrankaSim offscreen (EGL).

    Only the scene update holds the simulator lock; rendering runs outside it so physics keeps
    stepping. A renderer belongs to the thread that created its GL context, so each camera
    renders on its own worker thread.
    """

    def __init__(self, sim: FrankaSim, camera: str, width: int = 320, height: int = 240) -> None:
        os.environ.setdefault("MUJOCO_GL", "egl")
        import mujoco

        if mujoco.mj_name2id(sim.model, mujoco.mjtObj.mjOBJ_CAMERA, camera) < 0:
            raise RuntimeFault(f"camera {camera!r} is not in the simulated scene")
        self._mujoco = mujoco
        self.name = camera
        self.width = width
        self.height = height
        self._sim = sim
        self._lock = threading.Lock()
        self._renderer: Any = None
        self._executor = _OwnThread(f"render-{camera}")
        self._executor.call(self._open)

    def _open(self) -> None:
        self._renderer = self._mujoco.Renderer(self._sim.model, self.height, self.width)

    def _render(self) -> np.ndarray:
        with self._sim.lock:
            self._renderer.update_scene(self._sim.data, camera=self.name)
        return self._renderer.render().copy()

    def capture(self) -> np.ndarray:
        with self._lock:
            if self._renderer is None:
                raise RuntimeFault(f"camera {self.name}: closed")
            return self._executor.call(self._render)

    def close(self) -> None:
        with self._lock:
            if self._renderer is not None:
                self._executor.call(self._renderer.close)
                self._renderer = None
            self._executor.shutdown()


class _OwnThread:
    """Runs calls on one dedicated thread (GL contexts are bound to the thread that made them)."""

    def __init__(self, name: str) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def call(self, fn: Any) -> Any:
        return self._pool.submit(fn).result(timeout=30.0)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
