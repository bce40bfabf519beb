"""`rpent export lerobot RUN_DIR... --out DIR`: run records to a LeRobotDataset v3.0.

The dataset is written into a hidden folder beside --out and renamed to it once complete, so a failed
or interrupted export leaves no half-written dataset (the hidden folder is removed, or, after a
SIGKILL, left under a name that says what it is).
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

from rpent.dataset import CONVENTIONS

log = logging.getLogger(__name__)


def add_export_parser(commands: argparse._SubParsersAction) -> None:
    export = commands.add_parser("export", help="turn run records into a training dataset (lerobot)",
                                 description="Turn run records into a training dataset.")
    formats = export.add_subparsers(dest="format", required=True, metavar="FORMAT")
    lerobot = formats.add_parser(
        "lerobot", help="a LeRobotDataset v3.0 (lerobot, openpi)",
        description="Write the stream of each run record (stream/, recorded at --record-hz) as a LeRobotDataset "
        "v3.0: one episode per run (per segment of a --resume'd run), the run's task as the episode's task. "
        "RUN may be a record folder, a glob, or an eval sweep's folder (its episodes).")
    lerobot.add_argument("runs", nargs="+", metavar="RUN", help="run record folder, glob, or eval sweep folder")
    lerobot.add_argument("--out", required=True, help="the dataset's folder (must not exist)")
    lerobot.add_argument("--only-solved", action="store_true",
                         help="only runs whose task was solved (result.json: solved true)")
    lerobot.add_argument("--repo-id", default=None,
                         help="the dataset's Hugging Face repo id, for the line that says how to load it (default: "
                         "local/<name of --out>; a v3.0 dataset's files do not name it)")
    lerobot.add_argument("--fps", type=int, default=None,
                         help="frames per second (default: the runs' record rate, 15 unless --record-hz said otherwise)")
    lerobot.add_argument("--convention", choices=CONVENTIONS, default="rpent",
                         help="rpent: every camera and arm under RPent's names; droid: the names and units openpi's "
                         "LeRobotDROIDDataConfig reads (one arm, images 180x320) (default rpent)")


def export_command(args: argparse.Namespace) -> int:
    from rpent.dataset.episodes import ExportError

    try:
        summary = export_lerobot(args.runs, Path(args.out), only_solved=args.only_solved, repo_id=args.repo_id,
                                 fps=args.fps, convention=args.convention)
    except ExportError as exc:
        print(f"rpent export lerobot: error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {summary['episodes']} episodes, {summary['frames']} frames at {summary['fps']} fps "
          f"({summary['convention']} convention) to {summary['out']} in {summary['seconds']:.1f} s")
    # lerobot takes the id where the dataset is loaded (a v3.0 dataset's files do not name it).
    print(f"load it with LeRobotDataset({summary['repo_id']!r}, root={summary['out']!r})")
    return 0


def export_lerobot(runs: list[str], out: Path, *, only_solved: bool = False, repo_id: str | None = None,
                   fps: int | None = None, convention: str = "rpent") -> dict:
    """Export; ExportError (one line naming the run or option and the rule) before anything is written."""
    from rpent.dataset.conventions import layout
    from rpent.dataset.episodes import ExportError, load_episodes, record_folders
    from rpent.dataset.lerobot_v3 import write_dataset

    started = time.monotonic()
    if out.exists():
        raise ExportError(f"--out: {out} exists (give a new folder: an export never writes into another dataset)")
    if not out.parent.is_dir():
        raise ExportError(f"--out: {out.parent} is not a folder")
    if fps is not None and not 1 <= fps <= 120:
        raise ExportError(f"--fps: must be between 1 and 120, got {fps}")
    folders = record_folders(runs)
    episodes = load_episodes(folders, fps=None if fps is None else float(fps), only_solved=only_solved)
    rate = fps if fps is not None else round(episodes[0].stream.hz)
    features = layout(episodes[0], convention)
    robot = str(episodes[0].stream.header.get("robot") or "unknown")
    aside = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        frames = write_dataset(aside, episodes, features, fps=rate, robot_type=robot)
        aside.rename(out)
    except BaseException:
        shutil.rmtree(aside, ignore_errors=True)
        raise
    return {"out": str(out), "repo_id": repo_id or f"local/{out.name}", "episodes": len(episodes), "frames": frames,
            "fps": rate, "convention": convention, "seconds": time.monotonic() - started}
