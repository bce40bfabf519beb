"""A MemoryManager subclass narrows what the common file tools may touch, as the interface says.

Every file tool asks `authorize_read` (read_text_file, read_image, list_dir) or `authorize_write`
(write_text_file) before it acts, so a lab's subclass that refuses more than the access mode does is
obeyed, in every mode, in the memory directory and in the run's output directory alike.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from rpent.memory import MemoryAccessError, MemoryManager
from rpent.tools import Toolkit
from rpent.tools.images import encode_png

MODES = ("read-only", "read-write", "inbox-write")
RULE = "this lab keeps private/ out of runs"


class LabMemory(MemoryManager):
    """The access mode's rules, and one of the lab's own: nothing in a folder named `private`."""

    def authorize_read(self, path: str | os.PathLike[str], *, extra_roots: Iterable[Path] = ()) -> Path:
        _refuse_private(path)
        return super().authorize_read(path, extra_roots=extra_roots)

    def authorize_write(self, path: str | os.PathLike[str], *, extra_roots: Iterable[Path] = ()) -> Path:
        _refuse_private(path)
        return super().authorize_write(path, extra_roots=extra_roots)


def _refuse_private(path: str | os.PathLike[str]) -> None:
    if "private" in Path(os.fspath(path)).parts:
        raise MemoryAccessError(f"path: {os.fspath(path)!r}: {RULE}")


def _fill(folder: Path) -> None:
    for sub in ("private", "open", "inbox/private", "inbox/open"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
        (folder / sub / "notes.md").write_text("cube is red")
        (folder / sub / "view.png").write_bytes(encode_png(np.zeros((4, 4, 3), np.uint8)))


@pytest.fixture
def lab(tmp_path: Path):
    """(memory root, output dir, a toolkit factory for a mode): both roots hold private/ and open/ files."""
    memory_root, out = tmp_path / "memory", tmp_path / "run"
    _fill(memory_root)
    kits: list[Toolkit] = []

    def toolkit(mode: str) -> Toolkit:
        kit = Toolkit(memory=LabMemory(memory_root, mode), output_dir=out)
        _fill(out)  # after the toolkit claimed the new directory for its record
        kits.append(kit)
        return kit

    yield memory_root, out, toolkit
    for kit in kits:
        kit.close()


def _target(root: str, memory_root: Path, out: Path, relative: str) -> str:
    # Memory paths as a model writes them (relative to the memory root); output paths are absolute.
    return relative if root == "memory" else str(out / relative)


READS = {"read_text_file": "notes.md", "read_image": "view.png", "list_dir": ""}


@pytest.mark.parametrize("root", ["memory", "output"])
@pytest.mark.parametrize("tool", sorted(READS))
@pytest.mark.parametrize("mode", MODES)
def test_every_reading_tool_obeys_a_narrowed_authorize_read(lab, mode: str, tool: str, root: str) -> None:
    memory_root, out, toolkit = lab
    kit = toolkit(mode)

    def call(folder: str):
        path = _target(root, memory_root, out, f"{folder}/{READS[tool]}".rstrip("/"))
        return kit.execute_tool(tool, {"path": path})

    refused, allowed = call("private"), call("open")
    assert refused.is_error and RULE in refused.error, refused.to_text()
    assert not refused.images and "cube is red" not in refused.to_text()
    assert not allowed.is_error, allowed.error  # the rule refused it, not a broken tool


WRITABLE = [("read-only", "output"), ("read-write", "memory"), ("read-write", "output"),
            ("inbox-write", "memory"), ("inbox-write", "output")]


@pytest.mark.parametrize(("mode", "root"), WRITABLE)
def test_write_text_file_obeys_a_narrowed_authorize_write(lab, mode: str, root: str) -> None:
    memory_root, out, toolkit = lab
    kit = toolkit(mode)
    folder = "inbox/" if (mode, root) == ("inbox-write", "memory") else ""

    def write(sub: str):
        path = _target(root, memory_root, out, f"{folder}{sub}/new.md")
        return kit.execute_tool("write_text_file", {"path": path, "text": "written"}), path

    (refused, refused_path), (allowed, allowed_path) = write("private"), write("open")
    base = memory_root if root == "memory" else Path("/")
    assert refused.is_error and RULE in refused.error, refused.to_text()
    assert not (base / refused_path).exists()
    assert not allowed.is_error, allowed.error
    assert (base / allowed_path).read_text() == "written"
