"""The record's fixed-rate stream: the robot's state, the action it ran and every camera's frame, sampled
together at one rate, for training data (`rpent export lerobot`, rpent.dataset).

On disk, in the record's `stream/` folder (segment N of a resumed run: `samples-N.jsonl`, `<camera>-N.mp4`):

    samples.jsonl   line 1, the header: {"format": "rpent-stream/1", "hz", "robot", "task", "segment",
                    "started_at", "arms": {name: {"joints", "gripper_max_width_m"}}, "cameras": [{"name",
                    "width", "height", "role": "exterior" | "wrist", "arm"}]};
                    then one line per sample, in order: {"i", "t" (s, on the robot's clock, from the first
                    sample), "wall" (s since the epoch), "calls": [[call id, tool], ...] running then,
                    "arms": {name: {...the robot's own fields...}}}
    <camera>.mp4    H.264, frame k is sample k's picture from that camera

A sample's line is written after its pictures are encoded, so every line has its frames (a crash can
leave a frame without its line, never the reverse). Lines are flushed as written and fsynced at most once a
second, the videos are fragmented MP4 (rpent.record.video): a SIGKILL loses the samples still queued for
the encoder (normally none) and the newest one. Encoding runs on its own thread: the sampler hands a
sample over and goes on.

What a sample's arm entry holds is the robot's business (robots/franka/recording.py); this module keeps the
file format, the writer and the reader.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rpent.record.segments import segment_file_name
from rpent.record.values import json_default
from rpent.record.video import FragmentedMp4

log = logging.getLogger(__name__)

FORMAT = "rpent-stream/1"
STREAM_FOLDER = "stream"
SAMPLES_FILE = "samples.jsonl"
# Training data goes through a second encoding on export: keep this one close to the camera's picture.
_CRF = 17
_SYNC_S = 1.0
_STOP = object()


class StreamError(ValueError):
    """A stream that cannot be read as one (missing, not a stream, no header): one line naming the file and the rule."""


def samples_path(output_dir: Path, segment: int) -> Path:
    return output_dir / STREAM_FOLDER / segment_file_name(SAMPLES_FILE, segment)


def video_path(output_dir: Path, segment: int, camera: str) -> Path:
    return output_dir / STREAM_FOLDER / segment_file_name(f"{camera}.mp4", segment)


class StreamWriter:
    """Writes one segment's stream; `add` is thread-safe and never waits for the encoder for long."""

    def __init__(self, output_dir: Path, segment: int, header: Mapping[str, Any], *, max_queue: int = 64) -> None:
        self.output_dir = Path(output_dir)
        self.segment = segment
        self.header = {"format": FORMAT, **header, "segment": segment}
        self.cameras = [c["name"] for c in self.header.get("cameras", [])]
        self.path = samples_path(self.output_dir, segment)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lines = open(self.path, "x", encoding="utf-8")  # noqa: SIM115 - closed by close()
        self._synced = 0.0
        self._write_line(self.header)
        self._videos: dict[str, FragmentedMp4] = {}
        self._queue: queue.Queue[object] = queue.Queue(maxsize=max_queue)
        self._closed = False
        self._lock = threading.Lock()
        self.written = 0
        self.dropped = 0
        self._broken = False
        self._thread = threading.Thread(target=self._run, name="rpent-stream", daemon=True)
        self._thread.start()

    def add(self, sample: dict[str, Any], frames: Mapping[str, np.ndarray]) -> bool:
        """Queue one sample (its "t" on the robot's clock; "i" is set here) with one picture per camera of the
        header; False if the encoder is so far behind that the sample was dropped (the stream then has a gap)."""
        missing = [name for name in self.cameras if name not in frames]
        if missing:
            raise ValueError(f"stream sample: no frame from camera(s) {missing}")
        with self._lock:
            if self._closed:
                return False
        try:
            self._queue.put((sample, {name: np.ascontiguousarray(frames[name]) for name in self.cameras}), timeout=0.5)
        except queue.Full:
            self.dropped += 1
            return False
        return True

    def close(self, timeout: float = 30.0) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._queue.put(_STOP)
        self._thread.join(timeout)
        for name, video in self._videos.items():
            try:
                video.close()
            except Exception:
                log.exception("closing the stream video of %s failed", name)
        self._lines.flush()
        os.fsync(self._lines.fileno())
        self._lines.close()
        if self.dropped:
            log.warning("stream: dropped %d samples because the encoder fell behind", self.dropped)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            sample, frames = item  # type: ignore[misc]
            if self._broken:
                self.dropped += 1
                continue
            try:
                self._write(sample, frames)
            except Exception:
                # Some camera's video may hold this sample's frame and another's not: later frames would no
                # longer be their samples'. The stream ends here; what it holds stays whole.
                log.exception("stream: writing sample %d failed; the stream ends there", self.written)
                self._broken = True

    def _write(self, sample: dict[str, Any], frames: dict[str, np.ndarray]) -> None:
        t = float(sample["t"])
        for name in self.cameras:
            rgb = frames[name]
            video = self._videos.get(name)
            if video is None:
                video = self._videos[name] = FragmentedMp4(
                    video_path(self.output_dir, self.segment, name), rgb.shape[1], rgb.shape[0],
                    fps=max(1, round(float(self.header["hz"]))), crf=_CRF)
            video.add(rgb, t)
        self._write_line({"i": self.written, **sample})
        self.written += 1

    def _write_line(self, entry: Mapping[str, Any]) -> None:
        self._lines.write(json.dumps(entry, ensure_ascii=False, default=json_default, allow_nan=False) + "\n")
        self._lines.flush()
        now = time.monotonic()
        if now - self._synced >= _SYNC_S:
            os.fsync(self._lines.fileno())
            self._synced = now


@dataclass
class Stream:
    """One segment's stream as read back: its header and its whole samples, each with its frames."""

    output_dir: Path
    segment: int
    header: dict[str, Any]
    samples: list[dict[str, Any]]

    @property
    def hz(self) -> float:
        return float(self.header["hz"])

    @property
    def cameras(self) -> list[dict[str, Any]]:
        return list(self.header.get("cameras", []))

    def video(self, camera: str) -> Path:
        return video_path(self.output_dir, self.segment, camera)

    def frames(self, camera: str) -> Iterator[np.ndarray]:
        """The camera's pictures (HxWx3 uint8), one per sample, in order."""
        import av

        wanted = len(self.samples)
        if wanted == 0:
            return
        count = 0
        with av.open(str(self.video(camera))) as container:
            try:
                for frame in container.decode(video=0):
                    yield frame.to_ndarray(format="rgb24")
                    count += 1
                    if count == wanted:
                        return
            except av.error.FFmpegError:
                pass  # a crash cut the last fragment: the samples were trimmed to the frames whole before it
        if count < wanted:
            raise StreamError(f"{self.video(camera)}: {count} frames for {wanted} samples")


def stream_segments(output_dir: Path) -> list[int]:
    """The segments of `output_dir` that have a stream, in order."""
    folder = Path(output_dir) / STREAM_FOLDER
    found = []
    for path in folder.glob("samples*.jsonl") if folder.is_dir() else []:
        stem = path.name[: -len(".jsonl")]
        if stem == "samples":
            found.append(1)
        elif stem.startswith("samples-") and stem[len("samples-"):].isdigit():
            found.append(int(stem[len("samples-"):]))
    return sorted(found)


def read_stream(output_dir: Path, segment: int = 1) -> Stream:
    """A segment's stream: the header and every sample whose line is whole and whose frames every camera's
    video holds (a crash leaves a partial last line, and a video that may stop short of the lines)."""
    path = samples_path(Path(output_dir), segment)
    if not path.is_file():
        raise StreamError(f"{path}: no such file (the run recorded no stream: --record-hz 0, or not a Franka run)")
    header: dict[str, Any] | None = None
    samples: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                break  # the line a crash cut
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                break
            if header is None:
                if not isinstance(entry, dict) or entry.get("format") != FORMAT:
                    raise StreamError(f"{path}: line 1 is not a {FORMAT} header")
                header = entry
            else:
                samples.append(entry)
    if header is None:
        raise StreamError(f"{path}: empty (no header)")
    stream = Stream(Path(output_dir), segment, header, samples)
    whole = min([len(samples)] + [_whole_frames(stream.video(c["name"])) for c in stream.cameras])
    del samples[whole:]
    return stream


def _whole_frames(path: Path) -> int:
    import av

    if not path.is_file():
        return 0
    count = 0
    try:
        with av.open(str(path)) as container:
            for packet in container.demux(video=0):
                if packet.size and not packet.is_corrupt:
                    count += 1
    except av.error.FFmpegError:
        pass  # the fragment a crash cut
    return count
