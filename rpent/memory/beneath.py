"""Open, list and replace files beneath a directory descriptor, never following a symbolic link.

A path checked by name and then opened by name can be redirected in between: another process swaps a
folder for a symbolic link to somewhere else. Here every component is opened relative to the
descriptor of the one before (openat with O_NOFOLLOW), starting from a descriptor of the authorised
root, and the final read, listing or rename goes through the last descriptor, so what was checked is
what is used. Symbolic links are refused outright rather than followed when they stay inside: a link's
target can change after it was looked at, and a lab has no need for links in its memory.

Paths here are tuples of plain names (no '', '.', '..'); `shown` is the caller's spelling, for errors.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path


class MemoryAccessError(PermissionError):
    """A path was refused: outside the allowed roots, through a link, or not writable in this run."""


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_NAME_MAX = 255
_RETRIES = 10


def open_root(root: Path) -> int:
    """A descriptor of an authorised root; the root itself is configuration, resolved when it was set."""
    return os.open(root, _DIR_FLAGS)


def open_folder(root_fd: int, parts: Sequence[str], shown: str, *, create: bool = False) -> int:
    """A new descriptor of the folder `parts` below `root_fd`; with `create`, missing folders are made."""
    fd = os.dup(root_fd)
    try:
        for depth, name in enumerate(parts):
            child = _open_subfolder(fd, name)
            if child == "missing" and create:
                with contextlib.suppress(FileExistsError):  # made by someone else meanwhile: opened like any other
                    os.mkdir(name, 0o777, dir_fd=fd)
                child = _open_subfolder(fd, name)
            if isinstance(child, str):
                raise _not_a_folder(child, shown, parts[: depth + 1])
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def probe(root_fd: int, parts: Sequence[str], shown: str) -> None:
    """Walk as far as `parts` exists, refusing a link anywhere on the way (a check, not a guarantee)."""
    fd = os.dup(root_fd)
    try:
        for depth, name in enumerate(parts):
            child = _open_subfolder(fd, name)
            if child in ("link", "changing") or (child == "other" and depth < len(parts) - 1):
                raise _not_a_folder(child, shown, parts[: depth + 1])
            if isinstance(child, str):
                return  # missing, or the file the path names
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def read_file(dir_fd: int, parts: Sequence[str], shown: str, limit: int | None) -> bytes:
    """Up to `limit` bytes (all if None) of the regular file `parts[-1]`, which is in `dir_fd`."""
    try:
        fd = os.open(parts[-1], _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        raise FileNotFoundError(f"path: {shown!r}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # what O_NOFOLLOW answers for a link, and only for a link
            raise _link_error(shown, parts) from None
        raise OSError(exc.errno, f"path: {shown!r}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        _check_single_regular_file(os.fstat(fd), shown)
        return handle.read() if limit is None else handle.read(limit)


def list_folder(dir_fd: int) -> list[tuple[str, os.stat_result]]:
    """(name, lstat) of every entry of `dir_fd`, sorted by name; entries removed meanwhile are skipped."""
    entries = []
    with os.scandir(dir_fd) as scan:
        for entry in scan:
            try:
                # scandir of a descriptor stats relative to it; follow_symlinks=False describes a link itself.
                entries.append((entry.name, entry.stat(follow_symlinks=False)))
            except FileNotFoundError:
                continue
    return sorted(entries, key=lambda item: item[0])


def replace_file(dir_fd: int, parts: Sequence[str], data: bytes, shown: str, *, replace: bool = True) -> None:
    """Make `parts[-1]` in `dir_fd` hold exactly `data`, atomically: a temporary file beside it, then a rename.

    The temporary file is created in `dir_fd` itself, so nothing is written anywhere else, and the rename
    replaces the directory entry (a link swapped in meanwhile is replaced, never followed). Without
    `replace` an existing entry is refused, atomically too (link(2) never replaces).
    """
    name = parts[-1]
    try:
        current = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        pass
    else:
        if stat.S_ISLNK(current.st_mode):
            raise _link_error(shown, parts)
        if stat.S_ISDIR(current.st_mode):
            raise IsADirectoryError(f"path: {shown!r} is a folder; give the name of a file inside it")
        _check_single_regular_file(current, shown)
    temp, fd = _create_temp(dir_fd, name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            if replace:
                os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            else:
                _link_new(temp, name, dir_fd, shown)
        except IsADirectoryError:
            raise IsADirectoryError(f"path: {shown!r} is a folder; give the name of a file inside it") from None
        os.fsync(dir_fd)  # the rename itself survives a power cut
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=dir_fd)
        raise


def _link_new(temp: str, name: str, dir_fd: int, shown: str) -> None:
    try:
        os.link(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise MemoryAccessError(
            f"path: {shown!r} already exists in this run's output directory; files there are never replaced "
            "(they are the run's record): choose a new name"
        ) from None
    os.unlink(temp, dir_fd=dir_fd)


def _open_subfolder(fd: int, name: str) -> int | str:
    """A descriptor of the folder `name` in `fd`, or what is there instead: missing, link, other, changing."""
    for _ in range(_RETRIES):
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            return "missing"
        except NotADirectoryError:
            # O_DIRECTORY|O_NOFOLLOW answers ENOTDIR for a link and for a file alike, so look; a folder
            # there now was swapped in meanwhile, and is opened like any other.
            kind = _kind(fd, name)
            if kind != "folder":
                return kind
    return "changing"


def _create_temp(dir_fd: int, name: str) -> tuple[str, int]:
    stem = name[: _NAME_MAX - 32]  # room for the dot, the random part and the suffix
    for _ in range(100):
        temp = f".{stem}.{secrets.token_hex(8)}.tmp"
        try:
            # 0o666: the umask applies, so the file gets the same mode as any other file the user makes.
            return temp, os.open(temp, _TEMP_FLAGS, 0o666, dir_fd=dir_fd)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {name!r}")


def _check_single_regular_file(info: os.stat_result, shown: str) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(f"path: {shown!r} is a folder, not a file")
    if not stat.S_ISREG(info.st_mode):
        raise MemoryAccessError(f"path: {shown!r} is not a regular file (a FIFO, socket or device); only regular files are used")
    if info.st_nlink > 1:
        raise MemoryAccessError(
            f"path: {shown!r} has {info.st_nlink} names (hard links); a file used here may have only one, "
            "because another name may lie outside the allowed folders"
        )


def _kind(dir_fd: int, name: str) -> str:
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return "missing"
    return "link" if stat.S_ISLNK(mode) else "folder" if stat.S_ISDIR(mode) else "other"


def _not_a_folder(kind: str, shown: str, prefix: Sequence[str]) -> OSError:
    if kind == "link":
        return _link_error(shown, prefix)
    if kind == "missing":
        return FileNotFoundError(f"path: {shown!r}: no such folder {_join(prefix)!r}")
    if kind == "changing":
        return MemoryAccessError(f"path: {shown!r}: {_join(prefix)!r} kept being replaced while it was opened")
    return NotADirectoryError(f"path: {shown!r}: {_join(prefix)!r} is not a folder")


def _link_error(shown: str, where: Sequence[str]) -> MemoryAccessError:
    return MemoryAccessError(f"path: {shown!r}: {_join(where)!r} is a symbolic link, and memory paths may not contain one")


def _join(parts: Sequence[str]) -> str:
    return "/".join(parts)
