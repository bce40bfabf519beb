"""Tools every toolkit offers: files and images in the robot's memory and the run's output directory."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Annotated, Any

from PIL import Image
from pydantic import Field

from rpent.memory.manager import MemoryAccessError, MemoryManager, write_text_atomic
from rpent.tools.context import ToolContext
from rpent.tools.images import is_png
from rpent.tools.result import ToolResult
from rpent.tools.tool import readonly, tool

MAX_READ_BYTES = 200_000
MAX_WRITE_BYTES = 1_000_000
MAX_LIST_ENTRIES = 500


def _authorize(ctx: ToolContext[Any], path: str, *, write: bool) -> Path:
    extra = [ctx.output_dir] if ctx.output_dir is not None else []
    memory = ctx.memory
    if memory is None:
        if not extra:
            raise MemoryAccessError("no memory directory and no output directory are configured for this run")
        # Without a memory directory only the run's own output is reachable; relative paths resolve there.
        memory = MemoryManager(extra[0], "read-only")
    return memory.authorize_write(path, extra_roots=extra) if write else memory.authorize_read(path, extra_roots=extra)


@tool
@readonly
def read_text_file(
    path: str,
    max_bytes: Annotated[int, Field(ge=1, le=MAX_READ_BYTES)] = 60_000,
    *,
    ctx: ToolContext[Any],
) -> dict[str, Any]:
    """Read a text file from the robot's memory directory or this run's output directory.

    Args:
        path: Path relative to the memory directory, or an absolute path inside the memory or output directory.
        max_bytes: Read at most this many bytes from the start of the file.
    """
    resolved = _authorize(ctx, path, write=False)
    if not resolved.is_file():
        raise FileNotFoundError(f"path {path!r}: no such file")
    with open(resolved, "rb") as handle:
        raw = handle.read(max_bytes + 1)
    text = raw[:max_bytes].decode("utf-8", errors="replace")
    return {"path": str(resolved), "text": text, "truncated": len(raw) > max_bytes}


@tool
def write_text_file(
    path: str,
    text: Annotated[str, Field(max_length=MAX_WRITE_BYTES)],
    *,
    ctx: ToolContext[Any],
) -> dict[str, Any]:
    """Write a text file (replacing it) in the robot's memory directory, where this run may write, or in this run's output directory.

    Args:
        path: Path relative to the memory directory, or an absolute path inside the memory or output directory.
        text: The whole new content of the file.
    """
    resolved = _authorize(ctx, path, write=True)
    write_text_atomic(resolved, text)
    return {"path": str(resolved), "bytes": len(text.encode("utf-8"))}


@tool
@readonly
def list_dir(path: str = ".", *, ctx: ToolContext[Any]) -> dict[str, Any]:
    """List a folder of the robot's memory directory or of this run's output directory.

    Args:
        path: Folder relative to the memory directory, or an absolute path inside the memory or output directory.
    """
    resolved = _authorize(ctx, path, write=False)
    if not resolved.is_dir():
        raise FileNotFoundError(f"path {path!r}: no such folder")
    entries = []
    for child in sorted(resolved.iterdir())[:MAX_LIST_ENTRIES]:
        is_dir = child.is_dir()
        entries.append({"name": child.name + ("/" if is_dir else ""), "bytes": None if is_dir else child.stat().st_size})
    return {"path": str(resolved), "entries": entries}


@tool
@readonly
def read_image(path: str, *, ctx: ToolContext[Any]) -> ToolResult:
    """Look at an image file (PNG or JPEG) from the robot's memory directory or this run's output directory.

    Args:
        path: Path relative to the memory directory, or an absolute path inside the memory or output directory.
    """
    resolved = _authorize(ctx, path, write=False)
    if not resolved.is_file():
        raise FileNotFoundError(f"path {path!r}: no such file")
    data = resolved.read_bytes()
    if not is_png(data):
        with Image.open(io.BytesIO(data)) as image:
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, format="PNG")
            data = buffer.getvalue()
    return ToolResult(data={"path": str(resolved)}, images=[data])


COMMON_TOOLS = (read_text_file, write_text_file, list_dir, read_image)
