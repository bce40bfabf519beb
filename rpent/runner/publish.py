"""A successful run's recipe and audit into the robot's memory inbox, and the run's id (its name there)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from rpent.memory import MemoryAccess, MemoryManager

log = logging.getLogger(__name__)


def qualifies_for_memory(finish_result: dict[str, Any] | None, solved: bool | None) -> bool:
    """A run is published to memory only if it finished with success and the robot did not disagree."""
    return bool(finish_result) and finish_result.get("status") == "success" and solved is not False


def publish_to_memory(memory: MemoryManager, files: list[Path], run_id: str) -> Path | None:
    """Copy recipe and audit into the memory inbox under a fresh folder; never over existing files."""
    if memory.access is MemoryAccess.READ_ONLY:
        log.info("memory is read-only for this run: nothing published")
        return None
    folder = memory.inbox / run_id
    suffix = 1
    while folder.exists():
        suffix += 1
        folder = memory.inbox / f"{run_id}-{suffix}"
    # Through the memory's own race-free writer: a link planted in the inbox is refused, never followed.
    for source in files:
        if source.exists():
            memory.write_file(folder / source.name, source.read_bytes())
    log.info("published recipe and audit to %s", folder)
    return folder


def run_id_for(robot: str, started: float) -> str:
    return f"{robot}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(started))}"
