"""Tools every toolkit offers: files and images in the robot's memory and the run's output directory."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Annotated, Any

from PIL import Image
from pydantic import Field

from rpent.memory.manager import MemoryAccessError, MemoryManager
from rpent.tools.context import ToolContext
from rpent.tools.images import is_png
from rpent.tools.result import ToolResult
from rpent.tools.tool import readonly, tool

MAX_READ_BYTES = 200_000
MAX_WRITE_BYTES = 1_000_000
MAX_LIST_ENTRIES = 500


def _memory(ctx: ToolContext[Any]) -> tuple[MemoryManager, list[Path]]:
    """The manager that judges this call's paths, and the extra roots (the run's output) it allows."""
    extra = [ctx.output_dir] if ctx.output_dir is not None else []
    if ctx.memory is not None:
        return ctx.memory, extra
    if not extra:
        raise MemoryAccessError("no memory directory and no output directory are configured for this run")
    # Without a memory directory only the run's own output is reachable; relative paths resolve there.
    return MemoryManager(extra[0], "read-only"), extra


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
    memory, extra = _memory(ctx)
    where, raw = memory.read_file(path, limit=max_bytes + 1, extra_roots=extra)
    text = raw[:max_bytes].decode("utf-8", errors="replace")
    return {"path": str(where), "text": text, "truncated": len(raw) > max_bytes}


@tool
def write_text_file(
    path: str,
    text: Annotated[str, Field(max_length=MAX_WRITE_BYTES)],
    *,
    ctx: ToolContext[Any],
) -> dict[str, Any]:
    """Write a text file (replacing it) in the robot's memory directory, where this run may write, or a new file in this run's output directory (files there are never replaced).

    Args:
        path: Path relative to the memory directory, or an absolute path inside the memory or output directory.
        text: The whole new content of the file.
    """
    memory, extra = _memory(ctx)
    data = text.encode("utf-8")  # validation already refused text that is not valid Unicode
    where = memory.write_file(path, data, extra_roots=extra)
    return {"path": str(where), "bytes": len(data)}


@tool
@readonly
def list_dir(path: str = ".", *, ctx: ToolContext[Any]) -> dict[str, Any]:
    """List a folder of the robot's memory directory or of this run's output directory.

    Folder names end with '/', symbolic links (which these file tools do not follow) with '@'; `bytes`
    is the size of each regular file.

    Args:
        path: Folder relative to the memory directory, or an absolute path inside the memory or output directory.
    """
    memory, extra = _memory(ctx)
    where, listing = memory.list_folder(path, extra_roots=extra)
    entries = [_entry(name, info) for name, info in listing[:MAX_LIST_ENTRIES]]
    return {"path": str(where), "entries": entries}


def _entry(name: str, info: os.stat_result) -> dict[str, Any]:
    # A name that is not UTF-8 is shown with \x escapes rather than break the JSON it travels in.
    shown = os.fsencode(name).decode("utf-8", errors="backslashreplace")
    if stat.S_ISDIR(info.st_mode):
        return {"name": shown + "/", "bytes": None}
    if stat.S_ISLNK(info.st_mode):
        return {"name": shown + "@", "bytes": None}
    return {"name": shown, "bytes": info.st_size if stat.S_ISREG(info.st_mode) else None}


@tool
@readonly
def read_image(path: str, *, ctx: ToolContext[Any]) -> ToolResult:
    """Look at an image file (PNG or JPEG) from the robot's memory directory or this run's output directory.

    Args:
        path: Path relative to the memory directory, or an absolute path inside the memory or output directory.
    """
    memory, extra = _memory(ctx)
    where, data = memory.read_file(path, extra_roots=extra)
    if not is_png(data):
        with Image.open(io.BytesIO(data)) as image:
            buffer = io.BytesIO()
            image.convert("RGB").save(buffer, format="PNG")
            data = buffer.getvalue()
    return ToolResult(data={"path": str(where)}, images=[data])


@tool
@readonly
def stop(reason: Annotated[str, Field(max_length=500)] = "", *, ctx: ToolContext[Any]) -> ToolResult:
    """Stop every arm and gripper now and keep everything still until a person releases the stop.

    Use it when something looks wrong or unsafe. A motion that is running is cancelled, every device
    holds where it is, and every motion tool is refused afterwards (read-only tools keep working).
    Only an operator can release it; no tool does.

    Args:
        reason: What looked wrong, for the operator (one line).
    """
    event = ctx.latch_stop(reason)
    data = {"latched": True, "line": event["line"], "cancelled_calls": event["cancelled_calls"],
            "halted": event.get("halted")}
    if "halt_error" in event:
        return ToolResult(data=data, error=f"the stop is latched, but {event['halt_error']}")
    return ToolResult(data=data)


COMMON_TOOLS = (read_text_file, write_text_file, list_dir, read_image, stop)
