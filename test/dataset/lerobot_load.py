"""Load a LeRobotDataset with lerobot's own reader and describe it as JSON (run in the lerobot venv).

    python lerobot_load.py REQUEST.json RESULT.json

REQUEST: {"root": ..., "repo_id": ..., "frames": [[episode_index, frame_index], ...], "out_npz": path|null}, or a
list of them (one process, one import of torch and lerobot, for several datasets): RESULT is then a list.
Run by lerobot_venv.load_dataset with HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1: nothing goes to the Hub.
This file imports nothing from the project (it runs in another venv, with `python -I`).
"""

import json
import sys
import time
from pathlib import Path


def _jsonable(value):
    """Plain JSON values from what lerobot and datasets hand back (tensors, numpy values, tuples)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def main(request_path: str, result_path: str) -> None:
    requests = json.loads(Path(request_path).read_text())
    results = [describe(request) for request in (requests if isinstance(requests, list) else [requests])]
    Path(result_path).write_text(json.dumps(results if isinstance(requests, list) else results[0], indent=1))


def describe(request: dict) -> dict:
    started = time.monotonic()

    import importlib.metadata

    import numpy as np
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    imported = time.monotonic()
    ds = LeRobotDataset(request["repo_id"], root=request["root"], video_backend="pyav")
    loaded = time.monotonic()

    meta = ds.meta
    table = ds.hf_dataset.data  # the Arrow table of data/*.parquet, as lerobot loaded it
    episode_of_row = table.column("episode_index").to_numpy()
    frame_of_row = table.column("frame_index").to_numpy()
    episodes = meta.episodes.to_dict() if meta.episodes is not None else {}  # stats/* columns already dropped

    result = {
        "lerobot_version": importlib.metadata.version("lerobot"),
        "codebase_version": meta.info.codebase_version,
        "repo_id": ds.repo_id,
        "robot_type": meta.robot_type,
        "fps": ds.fps,
        "num_episodes": ds.num_episodes,
        "total_frames": len(ds),
        "data_rows": int(table.num_rows),
        "features": _jsonable(meta.features),
        "video_keys": list(meta.video_keys),
        "camera_keys": list(meta.camera_keys),
        "episode_lengths": {
            int(ep): int(n) for ep, n in zip(*np.unique(episode_of_row, return_counts=True), strict=True)
        },
        "episodes": _jsonable(episodes),
        "tasks": {str(task): int(row.task_index) for task, row in meta.tasks.iterrows()}
        if meta.tasks is not None else {},
        "stats_keys": sorted(meta.stats) if meta.stats is not None else None,
        "frames": [],
    }

    images = {}
    for ep, frame in request["frames"]:
        rows = np.flatnonzero((episode_of_row == ep) & (frame_of_row == frame))
        if len(rows) != 1:
            raise SystemExit(f"episode {ep} frame {frame}: {len(rows)} rows in data/*.parquet, expected 1")
        item = ds[int(rows[0])]
        values = {}
        for key, value in item.items():
            if key in meta.video_keys:
                # lerobot hands back float32 CHW in [0, 1] (uint8 / 255): back to the uint8 HWC it decoded
                hwc = (value.permute(1, 2, 0).numpy() * 255.0).round().clip(0, 255).astype(np.uint8)
                images[f"{ep}_{frame}_{key}"] = hwc
                values[key] = {"shape": list(hwc.shape), "dtype": "uint8"}
            else:
                values[key] = _jsonable(value)
        result["frames"].append({"episode_index": ep, "frame_index": frame, "row": int(rows[0]), "values": values})
    decoded = time.monotonic()

    if request.get("out_npz") and images:
        np.savez_compressed(request["out_npz"], **images)
    result["timings_s"] = {
        "import": round(imported - started, 3),
        "load": round(loaded - imported, 3),
        "frames": round(decoded - loaded, 3),
    }
    return result


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
