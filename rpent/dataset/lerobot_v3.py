"""A LeRobotDataset v3.0 on disk, written with pyarrow and PyAV (torch and lerobot are not needed to write it;
lerobot's own `LeRobotDataset` loads it: test/dataset).

    meta/info.json                                      codebase_version "v3.0", fps, features, counts, path templates
    meta/stats.json                                     per feature: min, max, mean, std, count, q01 ... q99
    meta/tasks.parquet                                  one row per task text (the index), its task_index
    meta/episodes/chunk-000/file-000.parquet            one row per episode: its frames' range, its data and video
                                                        files, its videos' from/to timestamps, its stats; and ours:
                                                        run_id, success, finish_status
    data/chunk-CCC/file-FFF.parquet                     one row per frame: the features, timestamp, frame_index,
                                                        episode_index, index, task_index
    videos/<feature>/chunk-CCC/file-FFF.mp4             H.264, every episode one after the other; frame k of an
                                                        episode at from_timestamp + k / fps

Files roll over at lerobot's limits (100 MB of data, 200 MB of video per file, 1000 files per chunk), so a
large export stays in the files lerobot's readers expect. Image statistics are per channel on [0, 1], as
lerobot computes them, from every STATS_EVERY-th frame.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from rpent.dataset.conventions import Feature, Layout, values, video_frames
from rpent.dataset.episodes import Episode

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000
DATA_FILE_MB = 100
VIDEO_FILE_MB = 200
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
STATS_EVERY = 5
# Two frames a keyframe, as lerobot encodes: a random frame decodes after at most one other.
_GOP = 2
_CRF = 18
_INDEX_FEATURES = {name: {"dtype": "int64", "shape": [1], "names": None}
                   for name in ("frame_index", "episode_index", "index", "task_index")}


def write_dataset(root: Path, episodes: Sequence[Episode], lay: Layout, *, fps: int, robot_type: str) -> int:
    """Write `episodes` as a dataset in `root` (an empty folder); returns the number of frames."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tasks: dict[str, int] = {}
    data = _Files(root, DATA_PATH, DATA_FILE_MB)
    videos = {f.key: _VideoFiles(root, f, fps) for f in lay.videos}
    rows: list[dict[str, Any]] = []
    all_values: dict[str, list[np.ndarray]] = {f.key: [] for f in lay.values}
    image_samples: dict[str, list[np.ndarray]] = {f.key: [] for f in lay.videos}
    total = 0
    data_tables: list[Any] = []
    for index, episode in enumerate(episodes):
        n = len(episode)
        task_index = tasks.setdefault(episode.task, len(tasks))
        columns = values(episode, lay)
        for key, array in columns.items():
            all_values[key].append(array)
        chunk, file = data.place(sum(t.nbytes for t in data_tables))
        if data.rolled:
            _write_table(pa, pq, data.previous_path, data_tables)
            data_tables = []
        data_tables.append(_frame_table(pa, lay, columns, fps, index, total, task_index, n))
        row: dict[str, Any] = {
            "episode_index": index, "tasks": [episode.task], "length": n,
            "data/chunk_index": chunk, "data/file_index": file,
            "dataset_from_index": total, "dataset_to_index": total + n,
        }
        episode_images: dict[str, list[np.ndarray]] = {}
        for feature in lay.videos:
            placed = videos[feature.key].add_episode(video_frames(episode, feature), n)
            episode_images[feature.key] = placed.pop("samples")
            image_samples[feature.key].extend(episode_images[feature.key])
            row.update({f"videos/{feature.key}/{name}": value for name, value in placed.items()})
        row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
        stats = {key: _stats(array) for key, array in columns.items()}
        stats.update({key: _image_stats(images) for key, images in episode_images.items()})
        for key, feature_stats in stats.items():
            for name, value in feature_stats.items():
                row[f"stats/{key}/{name}"] = value.tolist()
        row.update({"run_id": episode.run_id, "run_dir": str(episode.run), "segment": episode.segment,
                    "success": episode.success, "finish_status": episode.finish_status})
        rows.append(row)
        total += n
    _write_table(pa, pq, data.path, data_tables)
    for video in videos.values():
        video.close()

    episodes_path = root / EPISODES_PATH.format(chunk_index=0, file_index=0)
    episodes_path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), episodes_path)
    pq.write_table(_tasks_table(pa, tasks), root / "meta" / "tasks.parquet")

    stats = {key: _stats(np.concatenate(arrays)) for key, arrays in all_values.items()}
    stats.update({key: _image_stats(images) for key, images in image_samples.items()})
    _write_json(root / "meta" / "stats.json", {key: {k: v.tolist() for k, v in s.items()} for key, s in stats.items()})
    _write_json(root / "meta" / "info.json", {
        "codebase_version": CODEBASE_VERSION,
        "robot_type": robot_type,
        "total_episodes": len(episodes),
        "total_frames": total,
        "total_tasks": len(tasks),
        "chunks_size": CHUNKS_SIZE,
        "data_files_size_in_mb": DATA_FILE_MB,
        "video_files_size_in_mb": VIDEO_FILE_MB,
        "fps": fps,
        "splits": {"train": f"0:{len(episodes)}"},
        "data_path": DATA_PATH,
        "video_path": VIDEO_PATH if lay.videos else None,
        "features": {**{f.key: _feature_info(f, fps) for f in lay.features},
                     "timestamp": {"dtype": "float32", "shape": [1], "names": None}, **_INDEX_FEATURES},
    })
    return total


def _frame_table(pa: Any, lay: Layout, columns: dict[str, np.ndarray], fps: int, episode: int, first: int,
                 task_index: int, n: int) -> Any:
    arrays: dict[str, Any] = {}
    for feature in lay.values:
        array = columns[feature.key]
        kind = pa.float32() if feature.dtype == "float32" else pa.int64()
        if feature.shape == (1,):
            arrays[feature.key] = pa.array(array.reshape(-1), kind)
        else:
            arrays[feature.key] = pa.FixedSizeListArray.from_arrays(pa.array(array.reshape(-1), kind), feature.shape[0])
    frame_index = np.arange(n, dtype=np.int64)
    arrays["timestamp"] = pa.array((frame_index / fps).astype(np.float32), pa.float32())
    arrays["frame_index"] = pa.array(frame_index, pa.int64())
    arrays["episode_index"] = pa.array(np.full(n, episode, dtype=np.int64), pa.int64())
    arrays["index"] = pa.array(first + frame_index, pa.int64())
    arrays["task_index"] = pa.array(np.full(n, task_index, dtype=np.int64), pa.int64())
    return pa.table(arrays)


def _tasks_table(pa: Any, tasks: dict[str, int]) -> Any:
    """task_index by task text, with the pandas metadata that makes pandas (lerobot's load_tasks) read the
    text back as the index, as a DataFrame lerobot wrote itself would be."""
    table = pa.table({"task_index": pa.array(list(tasks.values()), pa.int64()),
                      "task": pa.array(list(tasks), pa.string())})
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64",
             "metadata": None},
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    return table.replace_schema_metadata({b"pandas": json.dumps(pandas_meta).encode()})


def _write_table(pa: Any, pq: Any, path: Path, tables: list[Any]) -> None:
    if not tables:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.concat_tables(tables), path)


def _feature_info(feature: Feature, fps: int) -> dict[str, Any]:
    info: dict[str, Any] = {"dtype": feature.dtype, "shape": list(feature.shape), "names": feature.names}
    if feature.dtype == "video":
        h, w, c = feature.shape
        info["info"] = {"video.height": h, "video.width": w, "video.codec": "h264", "video.pix_fmt": "yuv420p",
                        "video.is_depth_map": False, "video.fps": fps, "video.channels": c, "has_audio": False}
    return info


def _stats(array: np.ndarray) -> dict[str, np.ndarray]:
    a = np.asarray(array, dtype=np.float64).reshape(len(array), -1)
    out = {"min": a.min(axis=0), "max": a.max(axis=0), "mean": a.mean(axis=0), "std": a.std(axis=0),
           "count": np.array([len(a)])}
    for q in QUANTILES:
        out[f"q{round(q * 100):02d}"] = np.quantile(a, q, axis=0)
    return out


def _image_stats(images: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Per channel on [0, 1], shaped (3, 1, 1) as lerobot's image statistics are."""
    pixels = np.stack(images).astype(np.float64).reshape(-1, 3) / 255.0
    stats = _stats(pixels)
    return {name: value if name == "count" else value.reshape(3, 1, 1) for name, value in
            {**stats, "count": np.array([len(images)])}.items()}


def _write_json(path: Path, payload: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")


@dataclass
class _Files:
    """Which chunk and file the next episode goes to: a new file once the current one reached its size."""

    root: Path
    template: str
    limit_mb: int
    chunk: int = 0
    file: int = 0
    started: bool = False
    rolled: bool = False
    previous_path: Path = field(default_factory=Path)

    @property
    def path(self) -> Path:
        return self.root / self.template.format(chunk_index=self.chunk, file_index=self.file, video_key="")

    def place(self, current_bytes: int) -> tuple[int, int]:
        self.rolled = False
        if self.started and current_bytes >= self.limit_mb * 1024 * 1024:
            self.previous_path = self.path
            self.chunk, self.file = (self.chunk + 1, 0) if self.file == CHUNKS_SIZE - 1 else (self.chunk, self.file + 1)
            self.rolled = True
        self.started = True
        return self.chunk, self.file


class _VideoFiles:
    """One video feature's files: episodes appended one after the other, frame k at k / fps."""

    def __init__(self, root: Path, feature: Feature, fps: int) -> None:
        self.root, self.feature, self.fps = root, feature, fps
        self.chunk = self.file = 0
        self.container: Any = None
        self.stream: Any = None
        self.frames = 0  # in the open file

    def _path(self) -> Path:
        return self.root / VIDEO_PATH.format(video_key=self.feature.key, chunk_index=self.chunk, file_index=self.file)

    def _open(self) -> None:
        import av

        path = self._path()
        path.parent.mkdir(parents=True, exist_ok=True)
        h, w, _ = self.feature.shape
        self.container = av.open(str(path), mode="w")
        self.stream = self.container.add_stream("libx264", rate=self.fps)
        self.stream.width, self.stream.height, self.stream.pix_fmt = w, h, "yuv420p"
        self.stream.codec_context.time_base = Fraction(1, self.fps)
        self.stream.options = {"preset": "veryfast", "crf": str(_CRF), "g": str(_GOP), "bf": "0"}
        self.frames = 0

    def add_episode(self, pictures: Iterable[np.ndarray], n: int) -> dict[str, Any]:
        import av

        if self.container is not None and self._path().stat().st_size >= VIDEO_FILE_MB * 1024 * 1024:
            self.close()
            self.chunk, self.file = (self.chunk + 1, 0) if self.file == CHUNKS_SIZE - 1 else (self.chunk, self.file + 1)
        if self.container is None:
            self._open()
        start = self.frames
        samples: list[np.ndarray] = []
        count = 0
        for count, rgb in enumerate(pictures, start=1):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
            frame.pts = self.frames
            frame.time_base = Fraction(1, self.fps)
            for packet in self.stream.encode(frame):
                self.container.mux(packet)
            self.frames += 1
            if (count - 1) % STATS_EVERY == 0:
                samples.append(rgb)
        if count != n:
            raise ValueError(f"{self.feature.key}: {count} pictures for {n} frames")
        return {"chunk_index": self.chunk, "file_index": self.file, "from_timestamp": start / self.fps,
                "to_timestamp": self.frames / self.fps, "samples": samples}

    def close(self) -> None:
        if self.container is None:
            return
        for packet in self.stream.encode(None):
            self.container.mux(packet)
        self.container.close()
        self.container = None
