"""One run per output directory.

A run's record opens as segment 1 in a new or empty directory. A directory that holds anything is
refused, so two runs never mix: their steps interleaved in one steps.jsonl, the first run's video
and result replaced, an old step's image name pointing at the new run's picture. A record is
continued only when asked (`resume=True`, the CLI's `--resume`): the run becomes the next segment,
which appends to the shared logs (steps.jsonl lines carry their segment; run.log gets a header) and
names every file of its own with `-N` before the extension (episode-2.mp4, result-2.json,
images/00002_move_to_front-2.png), so nothing earlier is overwritten.

`segments.jsonl` in the record is the ledger, appended under an exclusive lock on the directory (so
of two runs opening one empty directory, one gets it and the other is refused, and concurrent
resumes get distinct numbers). An entry point (CLI, MCP server, dashboard, ROS node) *claims* a
segment before it starts anything (`open_segment`); the Toolkit built afterwards *attaches* to that
claim (`attach_segment`, from Toolkit.__init__). A Toolkit may attach only to an unattached claim of
its own process, or claim segment 1 of an empty directory itself: no entry point can mix runs by
forgetting to ask, and each segment is written by exactly one toolkit. A ROS toolkit node told by
another node which directory to write (the dashboard node's task folder) adopts that node's claim
(`adopt_segment`).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEGMENTS_FILE = "segments.jsonl"
#: A directory holding any of these is an RPent run record (the last three predate segments.jsonl).
RECORD_MARKERS = (SEGMENTS_FILE, "steps.jsonl", "result.json", "run.log")
_SHOWN_ENTRIES = 5  # of a used directory's entries, in its refusal


class RecordError(ValueError):
    """The directory cannot hold this run; the message names the option and the rule, on one line."""


@dataclass(frozen=True)
class Segment:
    """One run's part of a record: segment 1 owns the plain names, segment N the names ending `-N`."""

    output_dir: Path
    number: int

    def name(self, filename: str) -> str:
        return segment_file_name(filename, self.number)

    def file(self, filename: str) -> Path:
        return self.output_dir / self.name(filename)


def segment_file_name(filename: str, number: int) -> str:
    """`episode.mp4` for segment 1, `episode-2.mp4` for segment 2 (the suffix goes before the extension)."""
    if number == 1:
        return filename
    stem, dot, extension = filename.rpartition(".")
    return f"{stem}-{number}.{extension}" if dot and stem else f"{filename}-{number}"


def open_segment(
    output_dir: str | Path, *, resume: bool = False, option: str = "--output-dir", resume_option: str | None = "--resume"
) -> Segment:
    """Claim the next segment of the record in `output_dir` for one run, creating the directory if needed.

    Refused with RecordError when the path is a file, when the directory holds anything and `resume`
    is false, or when `resume` is true and the directory is not a run record; a refusal writes
    nothing. `option` and `resume_option` are how the caller's user names the directory and the
    resume switch (None: the caller offers none). The toolkit this process builds next for
    `output_dir` attaches to the claim.
    """
    with _locked(Path(output_dir), option, resume_option) as path:
        number = _next_number(path, resume, option, resume_option)
        _append(path, {"segment": number, "claimed_at": round(time.time(), 3), "pid": os.getpid(), "resumed": number > 1})
    return Segment(path, number)


def attach_segment(output_dir: str | Path, *, option: str = "output_dir") -> Segment:
    """For the toolkit that writes the record: the segment this process claimed and no toolkit took
    yet; in an empty directory, segment 1 claimed on the spot. Anything else is refused."""
    with _locked(Path(output_dir), option, None) as path:
        now, pid = round(time.time(), 3), os.getpid()
        if not os.listdir(path):
            _append(path, {"segment": 1, "claimed_at": now, "pid": pid, "resumed": False, "toolkit_at": now})
            return Segment(path, 1)
        number = _open_claim(path)
        if number is None or _ledger(path)[0][number]["pid"] != pid:
            raise _not_empty(path, os.listdir(path), option, None)
        _append(path, {"segment": number, "toolkit_at": now, "pid": pid})
    return Segment(path, number)


def adopt_segment(output_dir: str | Path, *, option: str = "output_dir") -> Segment:
    """Take over, for a toolkit this process builds next, the open claim another process made on
    `output_dir` (a ROS dashboard node claims a task folder, then asks the toolkit node to write
    it); in an empty directory, claim segment 1. A record some toolkit already writes is refused."""
    with _locked(Path(output_dir), option, None) as path:
        number = _open_claim(path) if os.listdir(path) else 1
        if number is None:
            raise _not_empty(path, os.listdir(path), option, None)
        _append(path, {"segment": number, "claimed_at": round(time.time(), 3), "pid": os.getpid(),
                       "resumed": number > 1, "adopted": True})
    return Segment(path, number)


@contextmanager
def _locked(path: Path, option: str, resume_option: str | None) -> Iterator[Path]:
    if path.exists() and not path.is_dir():
        raise RecordError(f"{option}: {path} is a file; the record needs a new or empty directory"
                          + (f" (or a run record to continue with {resume_option})" if resume_option else ""))
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise RecordError(f"{option}: cannot create the directory {path}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd closes; serialises claims between processes too
        yield path
    finally:
        os.close(fd)


def _not_empty(path: Path, entries: list[str], option: str, resume_option: str | None) -> RecordError:
    if is_run_record(entries):
        hint = f" (pass {resume_option} to continue that record as a new segment)" if resume_option else ""
        return RecordError(f"{option}: {path} is not empty: it holds a run record; each run needs a new or empty "
                           f"directory{hint}")
    # Not a record: --resume would be refused too, so say what the folder holds instead.
    names = sorted(name + "/" if (path / name).is_dir() else name for name in entries)
    shown = ", ".join(names[:_SHOWN_ENTRIES]) + (f" and {len(names) - _SHOWN_ENTRIES} more" if len(names) > _SHOWN_ENTRIES else "")
    return RecordError(f"{option}: {path} is not empty and not a run record (it holds {shown}); "
                       f"each run needs a new or empty directory")


def is_run_record(entries: list[str]) -> bool:
    """Whether a directory holding `entries` is an RPent run record."""
    return any(name in entries for name in RECORD_MARKERS)


def _next_number(path: Path, resume: bool, option: str, resume_option: str | None) -> int:
    entries = os.listdir(path)
    if not entries:
        return 1
    if not resume:
        raise _not_empty(path, entries, option, resume_option)
    if not is_run_record(entries):
        raise RecordError(f"{option}: {path} is not an RPent run record (no {', '.join(RECORD_MARKERS)}); "
                          f"{resume_option} only continues a record")
    claims, _ = _ledger(path)
    number = max(claims, default=1) + 1  # a record from before segments.jsonl is segment 1
    # Never reuse a number whose files exist (e.g. segments.jsonl was edited by hand).
    while any((path / segment_file_name(name, number)).exists() for name in ("episode.mp4", "result.json", "transcript.json")):
        number += 1
    return number


def _open_claim(path: Path) -> int | None:
    """The last claimed segment if no toolkit has attached to it yet."""
    claims, attached = _ledger(path)
    if not claims:
        return None
    number = max(claims)
    return None if number in attached else number


def _ledger(path: Path) -> tuple[dict[int, dict[str, Any]], set[int]]:
    """segments.jsonl as {segment: its latest claim} and the segments a toolkit attached to."""
    claims: dict[int, dict[str, Any]] = {}
    attached: set[int] = set()
    manifest = path / SEGMENTS_FILE
    if not manifest.exists():
        return claims, attached
    for line in manifest.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn last line from a crash
        number = entry.get("segment") if isinstance(entry, dict) else None
        if not isinstance(number, int):
            continue
        if "claimed_at" in entry:
            claims[number] = entry
        if "toolkit_at" in entry:
            attached.add(number)
    return claims, attached


def _append(path: Path, entry: dict[str, Any]) -> None:
    fd = os.open(path / SEGMENTS_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(entry) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
