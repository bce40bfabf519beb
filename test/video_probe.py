"""What a standard player sees in an MP4: probed with the real `ffprobe`, as a user would check a video.

A module of its own (not conftest) so tests in several folders share it. Without ffprobe the tests
fail (they never skip): CI installs it through scripts/setup.sh.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Probe:
    """`frames`: decodable video frames; `packets`: video packets the demuxer found; `last_s`: the last
    decodable frame's time from the first one (0 without frames)."""

    has_video: bool
    frames: int
    packets: int
    last_s: float

    @property
    def playable(self) -> bool:
        return self.has_video and self.frames >= 1


def ffprobe() -> str:
    path = shutil.which("ffprobe")
    if path is None:
        raise AssertionError("ffprobe not found: run scripts/setup.sh (it installs the Debian package ffmpeg)")
    return path


def probe(path: Path) -> Probe:
    """Probe `path`; a missing, empty or unreadable file is a probe with no video."""
    if not path.is_file() or path.stat().st_size == 0:
        return Probe(False, 0, 0, 0.0)
    command = [ffprobe(), "-v", "error", "-select_streams", "v:0", "-count_packets", "-of", "json",
               "-show_entries", "stream=codec_type,nb_read_packets:frame=best_effort_timestamp_time", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    try:
        report = json.loads(done.stdout or "{}")
    except json.JSONDecodeError:
        return Probe(False, 0, 0, 0.0)
    streams = [s for s in report.get("streams", []) if s.get("codec_type") == "video"]
    times = [float(f["best_effort_timestamp_time"]) for f in report.get("frames", [])
             if f.get("best_effort_timestamp_time") not in (None, "N/A")]
    packets = int(streams[0].get("nb_read_packets", 0)) if streams else 0
    last_s = max(times) - min(times) if times else 0.0
    return Probe(bool(streams), len(times), packets, last_s)
