"""Which recorded runs become episodes, and each episode's frames on a fixed-rate grid.

A run record (its `stream/`, rpent.record.stream) gives one episode per segment with a stream. The runs
given may be record folders, glob patterns, or an eval sweep's folder (its episodes' records). A run's
task, success and finish status come from its stream header and its result.json (absent when the run
was killed: then success and status are unknown, and `--only-solved` leaves it out).

Frames: the stream is sampled on the robot's clock while the robot acts, at its rate (a loaded machine
samples late now and then), and nothing is sampled between tool calls. At the stream's own rate an
episode's frames are its samples, one for one, as DROID's are its control steps: each policy step the
arm ran is one frame. At another fps, each stretch of samples without a gap (no two samples more than
GAP_PERIODS periods apart) is laid on a grid of 1/fps from its first sample, each grid point taking the
nearest sample. Either way the stretches follow each other, so the planner's thinking between calls is
not in the episode.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rpent.eval.records import SWEEP_FILE
from rpent.record.segments import RECORD_MARKERS, segment_file_name
from rpent.record.stream import Stream, StreamError, read_stream, stream_segments

# Samples further apart than this many periods belong to different stretches (a pause between calls).
GAP_PERIODS = 2.5


class ExportError(ValueError):
    """Bad input for an export: one line naming the run (or the option) and the rule."""


@dataclass
class Episode:
    run: Path
    segment: int
    stream: Stream
    task: str
    success: bool | None
    finish_status: str | None
    #: For each frame of the episode, the index of its stream sample (resampled to the dataset's fps).
    samples: np.ndarray

    @property
    def run_id(self) -> str:
        return self.run.name if self.segment == 1 else f"{self.run.name}-{self.segment}"

    def __len__(self) -> int:
        return len(self.samples)


def record_folders(paths: Sequence[str]) -> list[Path]:
    """The run records named by `paths`: folders, glob patterns, or sweep folders (their episodes), in order."""
    found: list[Path] = []
    for given in paths:
        matches = sorted(glob.glob(given)) if glob.has_magic(given) else [given]
        if not matches:
            raise ExportError(f"{given}: no run record matches")
        for match in matches:
            path = Path(match)
            if (path / SWEEP_FILE).is_file():
                found.extend(p for p in sorted(path.iterdir())
                             if p.is_dir() and not p.name.startswith("_") and _is_record(p))
            elif not path.is_dir():
                raise ExportError(f"{path}: not a run record (no such folder)")
            elif not _is_record(path):
                raise ExportError(f"{path}: not a run record (none of {', '.join(RECORD_MARKERS)})")
            else:
                found.append(path)
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise ExportError(f"{', '.join(paths)}: no run record in it")
    return unique


def load_episodes(runs: Sequence[Path], *, fps: float | None = None, only_solved: bool = False) -> list[Episode]:
    """One episode per streamed segment of each run, at `fps` (default: the first stream's rate); ExportError
    naming the run for what cannot be one."""
    episodes: list[Episode] = []
    for run in runs:
        segments = stream_segments(run)
        if not segments:
            raise ExportError(f"{run}: the record has no stream (recorded with --record-hz 0, by a ROS toolkit "
                              "node, or before RPent recorded streams)")
        for segment in segments:
            try:
                stream = read_stream(run, segment)
            except StreamError as exc:
                raise ExportError(f"{run}: {exc}") from None
            result = _result(run, segment)
            success = None if result is None else result.get("solved")
            if only_solved and success is not True:
                continue
            if not stream.samples:
                raise ExportError(f"{run}: segment {segment}'s stream holds no sample (the robot never acted)")
            if fps is None:
                fps = float(max(1, round(stream.hz)))  # a dataset's fps is a whole number
            samples = resample([s["t"] for s in stream.samples], stream.hz, None if fps == round(stream.hz) else fps)
            task = stream.header.get("task") or (result or {}).get("task") or ""
            episodes.append(Episode(run, segment, stream, str(task), success,
                                    None if result is None else result.get("finish_status"), samples))
    if not episodes:
        raise ExportError("--only-solved: none of the runs solved its task" if only_solved else "no episode to export")
    _check_alike(episodes)
    return episodes


def resample(times: Sequence[float], hz: float, fps: float | None) -> np.ndarray:
    """For a grid of 1/fps over each gapless stretch of `times` (None: the samples themselves), the nearest
    sample's index."""
    t = np.asarray(times, dtype=float)
    cuts = np.flatnonzero(np.diff(t) > GAP_PERIODS / hz) + 1
    indices: list[np.ndarray] = []
    for start, end in zip(np.r_[0, cuts], np.r_[cuts, len(t)], strict=True):
        stretch = t[start:end]
        if fps is None:
            indices.append(np.arange(start, end))
            continue
        grid = stretch[0] + np.arange(int(np.floor((stretch[-1] - stretch[0]) * fps + 0.5)) + 1) / fps
        right = np.clip(np.searchsorted(stretch, grid), 0, len(stretch) - 1)
        left = np.clip(right - 1, 0, len(stretch) - 1)
        nearest = np.where(np.abs(stretch[left] - grid) <= np.abs(stretch[right] - grid), left, right)
        indices.append(start + nearest)
    return np.concatenate(indices)


def _is_record(path: Path) -> bool:
    return any((path / marker).exists() for marker in RECORD_MARKERS)


def _result(run: Path, segment: int) -> dict[str, Any] | None:
    try:
        result = json.loads((run / segment_file_name("result.json", segment)).read_text())
    except (OSError, ValueError):
        return None  # killed before it was written: success unknown
    return result if isinstance(result, dict) else None


def _check_alike(episodes: Sequence[Episode]) -> None:
    """One dataset holds one robot, one camera set and one rate."""
    first = episodes[0]

    def shape(e: Episode) -> tuple[Any, ...]:
        h = e.stream.header
        return (h.get("robot"), sorted(h.get("arms", {})),
                [(c["name"], c["width"], c["height"]) for c in h.get("cameras", [])], float(h["hz"]))

    want = shape(first)
    for episode in episodes[1:]:
        got = shape(episode)
        for what, a, b in zip(("robot", "arms", "cameras", "rate (Hz)"), want, got, strict=True):
            if a != b:
                raise ExportError(f"{episode.run}: {what} {b}, but {first.run} has {a}: one dataset holds runs "
                                  "of one robot, arms, cameras and rate")
