"""The sweep's folder: `sweep.json` (the plan), one `rpent run` record per episode, and what crashed.

    <out>/sweep.json              the sweep and its episode ids, written before the first episode
    <out>/<episode id>/           the episode's record, exactly as `rpent run --output-dir` writes it
    <out>/_attempts/<id>-N/       the partial record of an attempt whose worker crashed or was killed
    <out>/_failures/<id>.json     why an episode has no complete record after its retries
    <out>/_memory/<id>/           the episode's own robot memory (unless the sweep shares one)
    <out>/_recipes/<id>/          the driver's copy of a recipe the episode's node did not have

A record is complete when its result.json parses: the runner writes it last, whatever the outcome,
so a missing or torn one means the worker died mid-episode. Resuming runs exactly the episodes
without a complete record.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from rpent.eval.sweep import Episode, Sweep, SweepError, parse_sweep
from rpent.record.atomic import write_json

SWEEP_FILE = "sweep.json"
ATTEMPTS_DIR = "_attempts"
FAILURES_DIR = "_failures"
MEMORY_DIR = "_memory"
RECIPES_DIR = "_recipes"
#: Fields that may change between a sweep and its resumption without making it another sweep.
RESUMABLE_CHANGES = frozenset({"retries", "concurrency", "token_budget", "cpus_per_episode",
                               "memory_per_episode_mb", "gpus_per_episode", "sim_hosts"})


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    """`text` without terminal colour codes (Ray colours the errors of its workers)."""
    return _ANSI.sub("", text)


def record_dir(out: Path, episode: Episode) -> Path:
    return out / episode.id


def read_result(record: Path) -> dict[str, Any] | None:
    """The record's result.json, or None if the record is not complete."""
    try:
        result = json.loads((record / "result.json").read_text())
    except (OSError, ValueError):
        return None
    return result if isinstance(result, dict) and "status" in result else None


def is_complete(record: Path) -> bool:
    return read_result(record) is not None


def set_aside_partial(out: Path, episode: Episode) -> Path | None:
    """Move a crashed attempt's partial record out of the way so the retry starts from an empty folder."""
    record = record_dir(out, episode)
    if not record.exists() or is_complete(record):
        return None
    if record.is_dir() and not any(record.iterdir()):
        return None
    attempts = out / ATTEMPTS_DIR
    attempts.mkdir(exist_ok=True)
    n = 1 + sum(1 for p in attempts.glob(f"{episode.id}-*") if p.is_dir())
    target = attempts / f"{episode.id}-{n}"
    shutil.move(str(record), str(target))
    return target


def attempts_of(out: Path, episode: Episode) -> list[Path]:
    return sorted(p for p in (out / ATTEMPTS_DIR).glob(f"{episode.id}-*") if p.is_dir())


def write_failure(out: Path, episode: Episode, error: str) -> None:
    folder = out / FAILURES_DIR
    folder.mkdir(exist_ok=True)
    write_json(folder / f"{episode.id}.json", {"episode": episode.id, "error": error})


def clear_failure(out: Path, episode: Episode) -> None:
    (out / FAILURES_DIR / f"{episode.id}.json").unlink(missing_ok=True)


def read_failure(out: Path, episode: Episode) -> str | None:
    try:
        return json.loads((out / FAILURES_DIR / f"{episode.id}.json").read_text())["error"]
    except (OSError, ValueError, KeyError):
        return None


def claim_sweep_folder(out: Path, sweep: Sweep) -> None:
    """Write sweep.json in a new folder, or check that an existing one holds the same sweep (resume)."""
    existing = read_sweep(out) if (out / SWEEP_FILE).exists() else None
    if existing is None:
        if out.exists() and any(p for p in out.iterdir()):
            raise SweepError(f"--out: {out} is not empty and holds no {SWEEP_FILE} (not a sweep folder)")
        out.mkdir(parents=True, exist_ok=True)
    else:
        mine, theirs = sweep.model_dump(), existing.model_dump()
        changed = sorted(k for k in mine if mine[k] != theirs.get(k) and k not in RESUMABLE_CHANGES)
        if changed:
            raise SweepError(f"--out: {out} holds another sweep ({', '.join(changed)} differ); "
                             "use a new folder, or the same sweep to resume")
    write_json(out / SWEEP_FILE, {"sweep": sweep.model_dump(), "episodes": [e.id for e in sweep.episodes()]})


def read_sweep(out: Path) -> Sweep:
    try:
        data = json.loads((out / SWEEP_FILE).read_text())
    except OSError:
        raise SweepError(f"--summarise: {out} holds no {SWEEP_FILE} (not a sweep folder)") from None
    except ValueError as exc:
        raise SweepError(f"--summarise: {out / SWEEP_FILE} is not valid JSON ({exc})") from None
    return parse_sweep(data["sweep"])


