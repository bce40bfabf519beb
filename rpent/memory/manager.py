"""Permissioned access to a robot's memory directory (and the run's output directory)."""

from __future__ import annotations

import enum
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

MEMORY_DIR_ENV = "RPENT_MEMORY_DIR"


def get_memory_dir(robot_name: str) -> Path:
    """Where a robot's memory lives unless a run says otherwise.

    `$RPENT_MEMORY_DIR/<robot>` when that variable is set, else `$XDG_DATA_HOME/rpent/memory/<robot>`
    (`~/.local/share/rpent/memory/<robot>` when XDG_DATA_HOME is unset).
    """
    if not robot_name or "/" in robot_name or robot_name in (".", ".."):
        raise ValueError(f"robot_name: must be a plain name, got {robot_name!r}")
    base = os.environ.get(MEMORY_DIR_ENV)
    if base:
        return Path(base).expanduser() / robot_name
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "rpent" / "memory" / robot_name


class MemoryAccess(enum.Enum):
    READ_ONLY = "read-only"
    READ_WRITE = "read-write"
    # Reads anywhere in the memory, writes only under the inbox: what an unreviewed run may do, so a
    # human (or the runner's publication step) decides what becomes shared memory.
    INBOX_WRITE = "inbox-write"


class MemoryAccessError(PermissionError):
    """A path was refused: outside the allowed roots, escaping through a link, or not writable."""


class MemoryManager:
    """Resolves and authorises every path a tool touches.

    Paths are resolved (`..`, symlinks) before they are checked, so nothing reaches outside the
    memory root or the extra roots through a clever name.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        access: MemoryAccess | str = MemoryAccess.READ_WRITE,
        *,
        inbox: str = "inbox",
    ) -> None:
        self.root = Path(root).expanduser().resolve()
        self.access = MemoryAccess(access)
        if Path(inbox).is_absolute() or ".." in Path(inbox).parts:
            raise ValueError(f"inbox: must be a folder inside the memory root, got {inbox!r}")
        self.inbox = self.root / inbox

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    def resolve(self, path: str | os.PathLike[str]) -> Path:
        """A relative path is taken relative to the memory root."""
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        return candidate.resolve()

    def authorize_read(self, path: str | os.PathLike[str], *, extra_roots: Iterable[Path] = ()) -> Path:
        """Return the resolved path if it may be read, else raise MemoryAccessError."""
        resolved = self.resolve(path)
        roots = [self.root, *(Path(r).resolve() for r in extra_roots)]
        if not any(_inside(resolved, root) for root in roots):
            raise MemoryAccessError(f"path {str(path)!r}: reads are allowed only under {_names(roots)}")
        return resolved

    def authorize_write(self, path: str | os.PathLike[str], *, extra_roots: Iterable[Path] = ()) -> Path:
        """Return the resolved path if it may be written, else raise MemoryAccessError."""
        resolved = self.resolve(path)
        extra = [Path(r).resolve() for r in extra_roots]
        if any(_inside(resolved, root) for root in extra):
            return resolved
        if self.access is MemoryAccess.READ_ONLY:
            raise MemoryAccessError(f"path {str(path)!r}: memory is read-only in this run")
        allowed = self.inbox if self.access is MemoryAccess.INBOX_WRITE else self.root
        if not _inside(resolved, allowed) or resolved == allowed:
            raise MemoryAccessError(f"path {str(path)!r}: writes are allowed only under {_names([allowed, *extra])}")
        return resolved


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _names(roots: Iterable[Path]) -> str:
    return " or ".join(str(r) for r in roots)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp makes 0600 files; a run's record is shared like any other file (umask applies).
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
