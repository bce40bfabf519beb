"""Live camera views: one sampler thread per frame channel, latest picture wins.

A robot offers pictures through its runtime: `init_runtime` may return
`runtime_kwargs["frame_sources"] = {channel_name: callable returning an RGB uint8 HxWx3 array}`.
Each channel is sampled at most at its `FrameChannel.max_fps`, only while a browser is watching,
and only a changed picture is encoded and announced. Frames are never queued: a client fetches
`/frames/<channel>.jpg?v=<n>` for the newest one.
"""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
from PIL import Image

from rpent.robot.spec import FrameChannel

log = logging.getLogger(__name__)

FrameSource = Callable[[], np.ndarray]
FRAME_SOURCES_KEY = "frame_sources"


def encode_jpeg(rgb: np.ndarray, quality: int = 80) -> bytes:
    array = np.asarray(rgb)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] not in (3, 4):
        raise ValueError(f"frame: must be an HxWx3 (or x4) uint8 array, got {array.dtype} {array.shape}")
    buffer = io.BytesIO()
    Image.fromarray(array[:, :, :3]).save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


@dataclass
class Frame:
    n: int = 0
    jpeg: bytes = b""
    error: str | None = None


class FrameHub:
    """Holds the newest JPEG of each channel and runs the samplers.

    `watching()` says whether anyone looks (the samplers idle otherwise); `on_new_frame()` is
    called after a channel's counter moved (the bus pokes its readers).
    """

    def __init__(
        self,
        channels: Mapping[str, FrameChannel],
        *,
        watching: Callable[[], bool] = lambda: True,
        on_new_frame: Callable[[], None] = lambda: None,
    ) -> None:
        self.channels = dict(channels)
        self._watching = watching
        self._on_new_frame = on_new_frame
        self._frames = {name: Frame() for name in self.channels}
        self._sources: dict[str, FrameSource] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}

    def attach(self, sources: Mapping[str, FrameSource]) -> None:
        """Start sampling these sources (unknown channel names are logged and ignored)."""
        for name, source in sources.items():
            if name not in self.channels:
                log.warning("frame source %r has no FrameChannel in the robot's Dashboard spec; ignored", name)
                continue
            with self._lock:
                self._sources[name] = source
            if name not in self._threads:
                thread = threading.Thread(target=self._sample, args=(name,), name=f"frames-{name}", daemon=True)
                self._threads[name] = thread
                thread.start()

    def detach(self, names: list[str]) -> None:
        with self._lock:
            for name in names:
                self._sources.pop(name, None)

    def latest(self, channel: str) -> Frame | None:
        with self._lock:
            frame = self._frames.get(channel)
            return None if frame is None else Frame(frame.n, frame.jpeg, frame.error)

    def counters(self) -> dict[str, int]:
        with self._lock:
            return {name: frame.n for name, frame in self._frames.items()}

    def sample_once(self, name: str, previous: np.ndarray | None = None) -> np.ndarray | None:
        """Take one picture from the channel's source; store and announce it if it changed."""
        with self._lock:
            source = self._sources.get(name)
        if source is None:
            return previous
        try:
            rgb = np.asarray(source())
            if previous is not None and previous.shape == rgb.shape and np.array_equal(previous, rgb):
                return previous
            jpeg = encode_jpeg(rgb)
        except Exception as exc:  # a broken camera shows as a message, never stops the session
            with self._lock:
                frame = self._frames[name]
                if frame.error is None:
                    log.warning("frame channel %s failed: %s", name, exc)
                frame.error = f"{type(exc).__name__}: {exc}"
            return previous
        with self._lock:
            frame = self._frames[name]
            frame.n += 1
            frame.jpeg = jpeg
            frame.error = None
        self._on_new_frame()
        return rgb.copy()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        for thread in list(self._threads.values()):
            thread.join(timeout_s)

    def _sample(self, name: str) -> None:
        period = 1.0 / max(self.channels[name].max_fps, 0.01)
        previous: np.ndarray | None = None
        while not self._stop.wait(period):
            if self._watching():
                previous = self.sample_once(name, previous)
