"""How many frames a run's episode video holds (PyAV, as the recorder writes it)."""

from __future__ import annotations

from pathlib import Path


def video_frames(path: Path) -> int:
    """Frames of `path`; of a fragmented MP4 still being written, those it holds whole so far."""
    import av

    count = 0
    with av.open(str(path)) as container:
        try:
            for _ in container.decode(video=0):
                count += 1
        except av.error.FFmpegError:
            pass  # the fragment being written
    return count
