"""What the episode recorder costs and how much of a video is on disk before the file is closed.

For toy-sized (160x160, the toy robot's top view) and camera-sized (640x480, a noisy camera-like
scene) frames, prints:

- throughput: frames/s the recorder encodes when fed as fast as it accepts frames, and bytes per frame;
- on disk while open: frames fed at a real rate (50 Hz toy; 30 Hz and 5 Hz, the franka default, for
  the camera) for a few seconds, then,
  before `close()`, how many of them a reader already decodes from the file and the seconds missing
  at its end (what a SIGKILL at that moment would lose).

    python bench/bench_video.py [--frames 600] [--live-s 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import av
import numpy as np

from robots.toy.runtime import ToyWorld
from rpent.record.video import VideoRecorder


def toy_frames(count: int) -> list[np.ndarray]:
    world = ToyWorld(speed_m_s=0.2)
    frames: list[np.ndarray] = []
    for target in ((0.05, 0.05, 0.2), (0.55, 0.05, 0.2), (0.55, 0.55, 0.1), (0.3, 0.3, 0.2)):
        world.move_to(target, should_stop=lambda dt: False, on_step=lambda: frames.append(world.render_top()))
    return [frames[i % len(frames)] for i in range(count)]


def camera_frames(count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    # A blocky static scene, a moving red object and sensor noise: roughly what a camera sees.
    scene = np.repeat(np.repeat(rng.integers(0, 255, (30, 40, 3), np.uint8), 16, 0), 16, 1)
    distinct = []
    for i in range(60):
        image = scene.copy()
        x = (i * 8) % 560
        image[200:280, x:x + 80] = (200, 30, 30)
        noise = rng.integers(-3, 4, image.shape, dtype=np.int16)
        distinct.append(np.clip(image.astype(np.int16) + noise, 0, 255).astype(np.uint8))
    return [distinct[i % len(distinct)] for i in range(count)]


def decoded_seconds(path: Path) -> tuple[int, float]:
    """Frames a reader decodes from `path` now, and the last one's time in seconds."""
    if not path.exists() or path.stat().st_size == 0:
        return 0, 0.0
    count, last = 0, 0.0
    try:
        with av.open(str(path)) as container:
            for frame in container.decode(video=0):
                count, last = count + 1, float(frame.time)
    except av.error.FFmpegError:
        pass  # a file with no complete fragment yet, or a torn tail
    return count, last


def throughput(frames: list[np.ndarray]) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        recorder = VideoRecorder(Path(tmp))
        t0 = time.perf_counter()
        for frame in frames:
            recorder.add(frame)
        path = recorder.close()
        elapsed = time.perf_counter() - t0
        assert path is not None
        return len(frames) / elapsed, path.stat().st_size / len(frames), recorder.dropped


def on_disk_while_open(frames: list[np.ndarray], rate_hz: float, seconds: float) -> tuple[int, int, float]:
    with tempfile.TemporaryDirectory() as tmp:
        recorder = VideoRecorder(Path(tmp))
        fed = int(rate_hz * seconds)
        start = time.monotonic()
        for i in range(fed):
            recorder.add(frames[i % len(frames)])
            time.sleep(max(0.0, start + (i + 1) / rate_hz - time.monotonic()))
        recorded_s = (fed - 1) / rate_hz
        count, last = decoded_seconds(recorder.episode_path)
        recorder.close()
        return fed, count, recorded_s - last if count else recorded_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=600, help="frames per throughput run (default 600)")
    parser.add_argument("--live-s", type=float, default=3.0, help="seconds fed at a real rate (default 3)")
    args = parser.parse_args()
    for name, make, rates in (("toy 160x160", toy_frames, (50.0,)), ("camera 640x480", camera_frames, (30.0, 5.0))):
        frames = make(args.frames)
        fps, bytes_per_frame, dropped = throughput(frames)
        print(f"{name}: throughput {fps:.0f} frames/s, {bytes_per_frame:.0f} B/frame, dropped {dropped}")
        for rate in rates:
            fed, on_disk, missing_s = on_disk_while_open(frames, rate, args.live_s)
            print(f"  fed at {rate:g} Hz, open file: {on_disk}/{fed} frames decodable, {missing_s:.2f} s missing at the end")


if __name__ == "__main__":
    main()
