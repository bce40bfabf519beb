"""Episode video and per-action clips: frames from `ctx.record_frame` encoded to H.264 MP4 with PyAV.

A frame is one picture, or a mapping of camera name to picture: then the video shows every camera
that was recorded, tiled and labelled with its name (rpent.record.video_tiles).

Encoding runs on one background thread so a motion tool never waits for the encoder. The MP4 is
fragmented (an empty moov first, then one fragment per frame) and each fragment goes to the OS as it
is made, so a video cut off by a crash or SIGKILL plays up to its last frame or so: a killed process
loses only the frames still queued for the encoder (normally none) and the newest one. Files are
fsynced at most once a second while written, and on close.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from rpent.record.segments import segment_file_name
from rpent.record.video_tiles import Tiler

log = logging.getLogger(__name__)

_FPS = 30  # nominal rate; timestamps follow the wall clock so playback is real time
_SYNC_S = 1.0  # fsync an open video at most this often: bounds the loss on an OS crash, not on SIGKILL
_STOP = object()


@dataclass
class _Frame:
    targets: tuple[str, ...]  # "episode" and/or a clip
    views: np.ndarray | dict[str, np.ndarray]
    t: float  # < 0: the end of the clip targets[0]


class _DurableFile:
    """The file PyAV writes an MP4 through. Every write goes straight to the OS, so a killed process
    loses nothing already written; fsync follows a write at most every `_SYNC_S`, so an OS crash or a
    power cut loses at most about that much more."""

    def __init__(self, path: Path) -> None:
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close(), which the muxer calls last
        self._synced = time.monotonic()

    def write(self, data: bytes) -> int:
        self._file.write(data)
        # BufferedWriter.flush retries short writes; libavformat would take a short count for success.
        self._file.flush()
        now = time.monotonic()
        if now - self._synced >= _SYNC_S:
            os.fsync(self._file.fileno())
            self._synced = now
        return len(data)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._file.seek(offset, whence)

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        if self._file.closed:
            return
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        finally:
            self._file.close()


class FragmentedMp4:
    """One H.264 MP4 laid out so that a crash at any moment leaves a playable file.

    An empty moov comes first and every frame is then its own fragment (moof + mdat), which the muxer
    writes out as soon as the next frame arrives (flush_packets: nothing waits in its I/O buffer).
    x264 runs with zero latency (no B-frames, no lookahead) so it returns each frame's packet at once;
    otherwise it would hold back ~10 frames, and all of them for as long as the robot pauses.
    A fragment costs ~100 bytes, a few percent of a camera video.
    """

    def __init__(self, path: Path, width: int, height: int, *, fps: int = _FPS, crf: int = 23) -> None:
        # H.264 in yuv420p needs even dimensions.
        self.width, self.height = width - width % 2, height - height % 2
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = _DurableFile(path)
        try:
            self.container = av.open(
                self._file, mode="w", format="mp4",
                options={"movflags": "empty_moov+frag_every_frame+default_base_moof", "flush_packets": "1"},
            )
        except Exception:
            self._file.close()
            raise
        self.stream = self.container.add_stream("libx264", rate=fps)
        self.stream.width, self.stream.height = self.width, self.height
        self.stream.pix_fmt = "yuv420p"
        self.stream.codec_context.time_base = Fraction(1, 1000)
        # A keyframe every 30 frames keeps seeking cheap.
        self.stream.options = {"preset": "veryfast", "tune": "zerolatency", "crf": str(crf), "g": "30"}
        self.t0: float | None = None
        self.last_pts = -1
        self.frames = 0

    def add(self, rgb: np.ndarray, t: float) -> None:
        if self.t0 is None:
            self.t0 = t
        pts = max(self.last_pts + 1, int((t - self.t0) * 1000))
        self.last_pts = pts
        frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[:, :, :3]), format="rgb24")
        if (frame.width, frame.height) != (self.width, self.height):
            frame = frame.reformat(width=self.width, height=self.height)
        frame.pts = pts
        frame.time_base = Fraction(1, 1000)
        for packet in self.stream.encode(frame):
            self.container.mux(packet)
        self.frames += 1

    def close(self) -> None:
        try:
            for packet in self.stream.encode(None):
                self.container.mux(packet)
            self.container.close()  # writes the index of fragments, then closes (and fsyncs) the file
        finally:
            self._file.close()


def _checked(rgb: np.ndarray) -> np.ndarray:
    array = np.asarray(rgb)
    if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] not in (3, 4):
        raise ValueError(f"record_frame: rgb must be an HxWx3 uint8 array, got {array.dtype} {array.shape}")
    # A copy: the caller may reuse its render buffer. The encoder never mutates, so one copy serves all targets.
    return array.copy()


class VideoRecorder:
    """Collects frames for `episode.mp4` and optional per-call clips; thread-safe."""

    def __init__(self, output_dir: Path, *, clips: bool = False, max_queue: int = 256, segment: int = 1) -> None:
        self.output_dir = output_dir
        self.clips = clips
        # A resumed record's segment N writes episode-N.mp4 and clips/<clip>-N.mp4 beside the earlier ones.
        self.segment = segment
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._writers: dict[str, FragmentedMp4] = {}
        self._finished_clips: dict[str, Path] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._tiler: Tiler | None = None  # the layout of camera views, fixed by the first tiled frame
        self.dropped = 0

    @property
    def episode_path(self) -> Path:
        return self.output_dir / segment_file_name("episode.mp4", self.segment)

    def _clip_file(self, clip: str) -> Path:
        return self.output_dir / "clips" / segment_file_name(f"{clip}.mp4", self.segment)

    def add(self, rgb: np.ndarray | Mapping[str, np.ndarray], clip: str | None = None) -> None:
        """One frame: a picture, or {camera name: picture} for a tiled, labelled frame of every camera."""
        views = {str(k): _checked(v) for k, v in rgb.items()} if isinstance(rgb, Mapping) else _checked(rgb)
        if isinstance(views, dict) and not views:
            raise ValueError("record_frame: a mapping of camera views needs at least one camera")
        with self._lock:
            if self._closed:
                return
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rpent-video", daemon=True)
                self._thread.start()
        targets = ("episode", clip) if clip is not None and self.clips else ("episode",)
        self._put(_Frame(targets, views, time.monotonic()))

    def end_clip(self, clip: str) -> None:
        if self.clips and self._thread is not None:
            self._put(_Frame((clip,), np.empty((0, 0, 3), np.uint8), -1.0))

    def _put(self, item: _Frame) -> None:
        try:
            # Bounded wait: better to drop a frame than to stall a motion behind a slow encoder.
            self._queue.put(item, timeout=1.0)
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            assert isinstance(item, _Frame)
            try:
                self._handle(item)
            except Exception:
                log.exception("video encoding failed for %s", ", ".join(item.targets))

    def _handle(self, item: _Frame) -> None:
        if item.t < 0:  # end of a clip
            writer = self._writers.pop(item.targets[0], None)
            if writer is not None:
                writer.close()
                self._finished_clips[item.targets[0]] = writer.path
            return
        rgb = item.views
        if isinstance(rgb, dict):  # tiled here, on the encoder's thread: the robot's never waits for it
            if self._tiler is None:
                self._tiler = Tiler.for_views(rgb)
            rgb = self._tiler.compose(rgb)
        for target in item.targets:
            writer = self._writers.get(target)
            if writer is None:
                path = self.episode_path if target == "episode" else self._clip_file(target)
                writer = self._writers[target] = FragmentedMp4(path, rgb.shape[1], rgb.shape[0])
            writer.add(rgb, item.t)

    def clip_path(self, clip: str) -> Path | None:
        return self._clip_file(clip) if self.clips else None

    def close(self, timeout: float = 60.0) -> Path | None:
        """Flush and close every file; returns the episode path if any frame was recorded."""
        with self._lock:
            if self._closed:
                return self.episode_path if self.episode_path.exists() else None
            self._closed = True
            thread = self._thread
        if thread is None:
            return None
        self._queue.put(_STOP)
        thread.join(timeout)
        for writer in self._writers.values():
            try:
                writer.close()
            except Exception:
                log.exception("closing %s failed", writer.path)
        self._writers.clear()
        if self.dropped:
            log.warning("video: dropped %d frames because the encoder fell behind", self.dropped)
        return self.episode_path
