"""Permissioned access to a robot's memory directory (and the run's output directory)."""

from __future__ import annotations

import contextlib
import enum
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rpent.memory import beneath
from rpent.memory.beneath import MemoryAccessError

MEMORY_DIR_ENV = "RPENT_MEMORY_DIR"
_NAME_MAX_BYTES = 255  # one file or folder name, as Linux and macOS file systems allow
_SHOWN_CHARS = 200     # how much of a refused path an error repeats


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


class MemoryManager:
    """Authorises every path a tool touches, and reads, lists and writes it without a race.

    A path is judged by its name: `~` expanded, a relative path taken under the memory root, `..`
    applied to the name before anything is opened; it must then lie under the memory root or an extra
    root (the run's output directory), spelled either as configured or resolved. It is then opened one
    component at a time from a descriptor of that root, refusing symbolic links (rpent.memory.beneath),
    so nothing reaches outside through a link, not even one swapped in after the check.

    Each act (read_file, list_folder, write_file, which the common file tools use) first asks
    `authorize_read` or `authorize_write`, so a subclass narrows what may be touched by overriding
    those two (raise MemoryAccessError to refuse); the act then applies these rules again to the
    name it was given. A subclass narrows, it never widens.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        access: MemoryAccess | str = MemoryAccess.READ_WRITE,
        *,
        inbox: str = "inbox",
    ) -> None:
        self._root = _Root.of(root)
        self.root = self._root.path
        self.access = MemoryAccess(access)
        inbox_parts = Path(os.path.normpath(inbox)).parts
        if Path(inbox).is_absolute() or ".." in inbox_parts or inbox_parts in ((), (".",)):
            raise ValueError(f"inbox: must be a folder inside the memory root, got {inbox!r}")
        self._inbox_parts = inbox_parts
        self.inbox = self.root.joinpath(*inbox_parts)

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    # ---- checks only (the path may change before it is used; the methods below act race-free) ----

    def authorize_read(self, path: str | os.PathLike[str], *, extra_roots: Iterable[Path] = ()) -> Path:
        """The path if it may be read, else raise MemoryAccessError."""
        shown, target = self._locate_read(path, extra_roots)
        self._probe(target, shown)
        return target.path

    def authorize_write(self, path: str | os.PathLike[str], *, extra_roots: Iterable[Path] = ()) -> Path:
        """The path if it may be written, else raise MemoryAccessError."""
        shown, target = self._locate_write(path, extra_roots)
        self._probe(target, shown)
        return target.path

    # ---- acting on an authorised path ----

    def read_file(
        self, path: str | os.PathLike[str], *, limit: int | None = None, extra_roots: Iterable[Path] = ()
    ) -> tuple[Path, bytes]:
        """(path, up to `limit` bytes) of a regular file that may be read."""
        extra_roots = list(extra_roots)
        self.authorize_read(path, extra_roots=extra_roots)
        shown, target = self._locate_read(path, extra_roots)
        if not target.parts:
            raise IsADirectoryError(f"path: {shown!r} is a folder, not a file")
        with _opened_folder(target.root, target.parts[:-1], shown) as fd:
            return target.path, beneath.read_file(fd, target.parts, shown, limit)

    def list_folder(
        self, path: str | os.PathLike[str], *, extra_roots: Iterable[Path] = ()
    ) -> tuple[Path, list[tuple[str, os.stat_result]]]:
        """(path, [(name, lstat)] sorted by name) of a folder that may be read."""
        extra_roots = list(extra_roots)
        self.authorize_read(path, extra_roots=extra_roots)
        shown, target = self._locate_read(path, extra_roots)
        with _opened_folder(target.root, target.parts, shown) as fd:
            return target.path, beneath.list_folder(fd)

    def write_file(self, path: str | os.PathLike[str], data: bytes, *, extra_roots: Iterable[Path] = ()) -> Path:
        """Replace (or create) a file that may be written, atomically; missing folders are made.

        In an extra root (the run's output directory) files are only ever created, never replaced:
        that folder holds the run's record (steps.jsonl, run.log, images), which a tool call must not
        be able to overwrite.
        """
        extra_roots = list(extra_roots)
        self.authorize_write(path, extra_roots=extra_roots)
        shown, target = self._locate_write(path, extra_roots)
        in_record = target.root in {_Root.of(r).path for r in extra_roots}
        target.root.mkdir(parents=True, exist_ok=True)  # the root is configuration, not model input
        with _opened_folder(target.root, target.parts[:-1], shown, create=True) as fd:
            beneath.replace_file(fd, target.parts, data, shown, replace=not in_record)
        return target.path

    # ---- the rules, applied to names ----

    def _locate_read(self, path: str | os.PathLike[str], extra_roots: Iterable[Path]) -> tuple[str, _Target]:
        shown, normalized = self._normalize(path)
        roots = [self._root, *(_Root.of(r) for r in extra_roots)]
        for root in roots:
            parts = root.parts_of(normalized)
            if parts is not None:
                return shown, _Target(root.path, parts)
        raise MemoryAccessError(f"path: {shown!r} is outside; reads are allowed only under {_names(roots)}")

    def _locate_write(self, path: str | os.PathLike[str], extra_roots: Iterable[Path]) -> tuple[str, _Target]:
        shown, normalized = self._normalize(path)
        extra = [_Root.of(r) for r in extra_roots]
        for root in extra:
            parts = root.parts_of(normalized)
            if parts is not None:
                return shown, _file_below(shown, _Target(root.path, parts), ())
        if self.access is MemoryAccess.READ_ONLY:
            raise MemoryAccessError(f"path: {shown!r}: memory is read-only in this run")
        allowed = self._inbox_parts if self.access is MemoryAccess.INBOX_WRITE else ()
        parts = self._root.parts_of(normalized)
        if parts is None or parts[: len(allowed)] != allowed:
            where = [self.root.joinpath(*allowed), *(r.path for r in extra)]
            raise MemoryAccessError(f"path: {shown!r}: writes are allowed only under {_names(where)}")
        return shown, _file_below(shown, _Target(self.root, parts), allowed)

    def _normalize(self, path: str | os.PathLike[str]) -> tuple[str, str]:
        """(the path as errors show it, the absolute path with `~`, `.` and `..` applied to the name)."""
        text = _path_text(path)
        shown = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "..."
        too_long = next((name for name in text.split(os.sep) if len(name.encode("utf-8")) > _NAME_MAX_BYTES), None)
        if too_long is not None:
            raise ValueError(f"path: {shown!r} has a name of {len(too_long.encode('utf-8'))} bytes; "
                             f"at most {_NAME_MAX_BYTES} are allowed")
        expanded = os.path.expanduser(text)
        if not os.path.isabs(expanded):
            expanded = os.path.join(self.root, expanded)
        return shown, os.path.normpath(expanded)

    @staticmethod
    def _probe(target: _Target, shown: str) -> None:
        try:
            root_fd = beneath.open_root(target.root)
        except FileNotFoundError:
            return  # nothing exists yet, so nothing on the way is a link
        try:
            beneath.probe(root_fd, target.parts, shown)
        finally:
            os.close(root_fd)


@dataclass(frozen=True)
class _Root:
    path: Path                   # resolved: where the walk starts
    spellings: tuple[str, ...]   # resolved and as configured: an absolute path may use either

    @classmethod
    def of(cls, root: str | os.PathLike[str]) -> _Root:
        given = os.path.abspath(os.path.expanduser(os.fspath(root)))
        resolved = os.path.realpath(given)
        return cls(Path(resolved), tuple(dict.fromkeys((resolved, given))))

    def parts_of(self, normalized: str) -> tuple[str, ...] | None:
        """The components of `normalized` below this root, or None if it is not under it."""
        for spelling in self.spellings:
            if normalized == spelling:
                return ()
            prefix = spelling.rstrip(os.sep) + os.sep
            if normalized.startswith(prefix):
                return tuple(normalized[len(prefix):].split(os.sep))
        return None


@dataclass(frozen=True)
class _Target:
    root: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> Path:
        return self.root.joinpath(*self.parts)


def _file_below(shown: str, target: _Target, folder: tuple[str, ...]) -> _Target:
    """A write names a file strictly inside its allowed folder, never the folder itself."""
    if target.parts == folder:
        raise MemoryAccessError(f"path: {shown!r} names the folder {target.path} itself; give the name of a file inside it")
    return target


def _path_text(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"path: must be text, got {type(text).__name__}")
    if "\x00" in text:
        raise ValueError(f"path: {text!r} contains a NUL character; paths may not")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        # A lone surrogate names no file anyone could have made, and cannot be logged as JSON.
        raise ValueError(f"path: {text!r} is not valid Unicode (a lone surrogate at index {exc.start})") from None
    return text


@contextlib.contextmanager
def _opened_folder(root: Path, parts: tuple[str, ...], shown: str, *, create: bool = False) -> Iterator[int]:
    try:
        root_fd = beneath.open_root(root)
    except FileNotFoundError:
        raise FileNotFoundError(f"path: {shown!r}: no such folder {str(root)!r}") from None
    except NotADirectoryError:
        raise MemoryAccessError(f"path: {shown!r}: {str(root)!r} is no longer a folder") from None
    try:
        fd = beneath.open_folder(root_fd, parts, shown, create=create)
    finally:
        os.close(root_fd)
    try:
        yield fd
    finally:
        os.close(fd)


def _names(roots: Iterable[_Root | Path]) -> str:
    return " or ".join(str(r.path if isinstance(r, _Root) else r) for r in roots)
