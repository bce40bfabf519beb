"""Memory paths stay inside their root while another thread swaps symbolic links in and out.

Each race test plants a secret folder and an empty sentinel folder outside the root, then calls one
file tool thousands of times while a swapper thread keeps replacing a folder or file inside the root
with a symbolic link to the outside (and back). An escape is anything outside showing up in a result,
or anything appearing in the sentinel folder.
"""

from __future__ import annotations

import ctypes
import logging
import os
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rpent.memory import MemoryManager
from rpent.tools import Toolkit, ToolResult
from rpent.tools.images import encode_png

RACE_ATTEMPTS = 5000
SECRET_TEXT = "SECRET outside the memory"
SECRET_ONLY_NAME = "secret-only.txt"

_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> None:
    """Swap two names in one step, so the path is never missing (the tightest race there is)."""
    if _libc.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


class Swapper(threading.Thread):
    """Calls `flip` until stopped; `flip(True)` puts the link in place, `flip(False)` the real entry."""

    def __init__(self, flip: Callable[[bool], None]) -> None:
        super().__init__(name="symlink-swapper", daemon=True)
        self._flip = flip
        self._halt = threading.Event()
        self.flipping = threading.Event()
        self.swaps = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                self._flip(True)
                self._flip(False)
                self.swaps += 1
                self.flipping.set()
        except BaseException as exc:  # surfaced by the test, not lost in a thread
            self.error = exc
            self.flipping.set()

    def __enter__(self) -> Swapper:
        self.start()
        assert self.flipping.wait(10), "the swapper never flipped"
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt.set()
        self.join(10)
        assert not self.is_alive(), "the swapper did not stop"
        if self.error is not None:
            raise self.error


@dataclass
class Lab:
    root: Path        # the memory root, or the run's output directory
    box: Path         # root/inbox/box: the folder the tools are pointed at
    secret: Path      # outside: what a read or a listing must never show
    sentinel: Path    # outside: what a write must never touch
    inside_png: bytes
    secret_png: bytes


@pytest.fixture
def base() -> Iterator[Path]:
    # tmpfs: every write fsyncs, and on a disk that, not the race, would dominate the run time.
    shm = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    with tempfile.TemporaryDirectory(dir=shm, prefix="rpent-race-") as name:
        yield Path(name)


def _lab(base: Path, mode: str) -> tuple[Toolkit, Lab]:
    root, secret, sentinel = base / "root", base / "secret", base / "sentinel"
    root.mkdir()
    # An output directory must be empty when its toolkit opens it, so the toolkit comes first.
    kit = Toolkit(output_dir=root) if mode == "output-dir" else Toolkit(memory=MemoryManager(root, mode))
    box = root / "inbox" / "box"
    box.mkdir(parents=True)
    secret.mkdir()
    sentinel.mkdir()
    inside_png = encode_png(np.full((4, 4, 3), 40, np.uint8))
    secret_png = encode_png(np.full((4, 4, 3), 200, np.uint8))
    (box / "note.txt").write_text("inside note")
    (box / "view.png").write_bytes(inside_png)
    (box / "new.txt").write_text("old")
    (secret / "note.txt").write_text(SECRET_TEXT)
    (secret / "view.png").write_bytes(secret_png)
    (secret / SECRET_ONLY_NAME).write_text(SECRET_TEXT)
    return kit, Lab(root, box, secret, sentinel, inside_png, secret_png)


def _tool_path(lab: Lab, mode: str, relative: str) -> str:
    # Memory paths are given as the model gives them (relative); output-dir paths are absolute.
    return str(lab.root / relative) if mode == "output-dir" else relative


def _exchanger(real: Path, link: Path, target: Path) -> Callable[[bool], None]:
    os.symlink(target, link)
    return lambda _to_link: exchange(real, link)


def _file_replacer(real: Path, target: Path) -> Callable[[bool], None]:
    # A write replaces whatever name it lands on, so an exchanged link would be written over once and
    # gone; make a fresh link (and a fresh file) every time instead.
    spare = real.with_name(".swap-" + real.name)

    def flip(to_link: bool) -> None:
        if to_link:
            os.symlink(target, spare)
        else:
            os.close(os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        os.replace(spare, real)

    return flip


MODES = ["read-only", "read-write", "inbox-write", "output-dir"]
READ_SWAPS = ["folder", "file"]


def _read_flip(lab: Lab, swap: str, name: str) -> Callable[[bool], None]:
    if swap == "folder":
        return _exchanger(lab.box, lab.box.with_name(".box-link"), lab.secret)
    return _exchanger(lab.box / name, lab.box / f".{name}-link", lab.secret / name)


def _race(kit: Toolkit, flip: Callable[[bool], None], call: Callable[[], str]) -> tuple[Counter[str], int]:
    """Run `call` RACE_ATTEMPTS times against the swapper; `call` classifies each outcome."""
    outcomes: Counter[str] = Counter()
    quiet = logging.getLogger("rpent.tools.toolkit")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # thousands of refused calls each log a warning with a traceback
    try:
        with Swapper(flip) as swapper:
            for _ in range(RACE_ATTEMPTS):
                outcomes[call()] += 1
    finally:
        quiet.setLevel(level)
        kit.close()
    return outcomes, swapper.swaps


def _report(tool: str, swap: str, mode: str, outcomes: Counter[str], swaps: int) -> None:
    print(f"\n{tool} ({swap} swapped, {mode}): {outcomes['escape']} escapes in {RACE_ATTEMPTS} attempts, "
          f"{swaps} swaps, outcomes {dict(outcomes)}")


#: A folder swapped so fast that every look at it saw another kind of entry is refused in its own words
#: (rpent/memory/beneath.py gives up after a few tries): the same rule at work, never an escape.
STILL_CHANGING = "kept being replaced while it was opened"


def _refusal(error: str, rule: str = "symbolic link") -> str:
    # Every refusal must be the rule at work, not some other failure the race provoked.
    return "refused" if rule in error or STILL_CHANGING in error else f"other error: {error}"


def _assert_race_was_live(outcomes: Counter[str]) -> None:
    # A call must have seen the real entry and (refused) the link, or nothing raced; and nothing else.
    assert outcomes["inside"] > 0 and outcomes["refused"] > 0, dict(outcomes)
    assert outcomes["inside"] + outcomes["refused"] == RACE_ATTEMPTS, dict(outcomes)


# Each reading tool: the path it is pointed at, and whether its result shows what lies outside.
READERS: dict[str, tuple[str, Callable[[ToolResult, Lab], bool]]] = {
    "read_text_file": ("inbox/box/note.txt", lambda result, lab: SECRET_TEXT in result.data["text"]),
    "read_image": ("inbox/box/view.png", lambda result, lab: result.images[0] == lab.secret_png),
    "list_dir": ("inbox/box", lambda result, lab: SECRET_ONLY_NAME in {e["name"] for e in result.data["entries"]}),
}
# A listing is of a folder, so only the folder can be swapped under it.
READ_CASES = [(tool, swap) for tool in READERS for swap in READ_SWAPS if tool != "list_dir" or swap == "folder"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("tool", "swap"), READ_CASES)
def test_reading_tools_never_show_outside_while_links_are_swapped_in(base, mode, tool, swap):
    kit, lab = _lab(base, mode)
    relative, shows_outside = READERS[tool]
    path = _tool_path(lab, mode, relative)

    def call() -> str:
        result = kit.execute_tool(tool, {"path": path})
        if result.is_error:
            return _refusal(result.error)
        return "escape" if shows_outside(result, lab) else "inside"

    outcomes, swaps = _race(kit, _read_flip(lab, swap, Path(relative).name), call)
    _report(tool, swap, mode, outcomes, swaps)
    assert outcomes["escape"] == 0, dict(outcomes)
    _assert_race_was_live(outcomes)


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("swap", READ_SWAPS)
def test_write_text_file_never_writes_outside_while_links_are_swapped_in(base, mode, swap):
    kit, lab = _lab(base, mode)
    path = _tool_path(lab, mode, "inbox/box/new.txt")
    if swap == "folder":
        flip = _exchanger(lab.box, lab.box.with_name(".box-link"), lab.sentinel)
    else:
        flip = _file_replacer(lab.box / "new.txt", lab.sentinel / "new.txt")
    sentinel_mtime = lab.sentinel.stat().st_mtime_ns
    # The output directory never replaces a file, so there each attempt writes a new name (and a name
    # that exists, link or file, is refused: both refusals count).
    record = mode == "output-dir"
    attempt = 0

    def call() -> str:
        nonlocal sentinel_mtime, attempt
        attempt += 1
        target = path.replace("new.txt", f"new-{attempt}.txt") if record and swap == "folder" else path
        result = kit.execute_tool("write_text_file", {"path": target, "text": "written"})
        touched = os.listdir(lab.sentinel)
        mtime = lab.sentinel.stat().st_mtime_ns
        if touched or mtime != sentinel_mtime:  # the mtime also catches a temporary file created and removed
            for name in touched:
                (lab.sentinel / name).unlink()
            sentinel_mtime = lab.sentinel.stat().st_mtime_ns
            return "escape"
        if result.is_error:
            if record and swap == "file" and "never replaced" in result.error:
                return "refused-existing"
            return _refusal(result.error, "read-only" if mode == "read-only" else "symbolic link")
        return "inside"

    outcomes, swaps = _race(kit, flip, call)
    _report("write_text_file", swap, mode, outcomes, swaps)
    assert outcomes["escape"] == 0, dict(outcomes)
    if mode == "read-only":
        assert outcomes["refused"] == RACE_ATTEMPTS, dict(outcomes)
    elif record and swap == "file":
        # Live race: some calls met the link, some the real file; none wrote anything.
        assert outcomes["refused"] > 0 and outcomes["refused-existing"] > 0, dict(outcomes)
        assert outcomes["refused"] + outcomes["refused-existing"] == RACE_ATTEMPTS, dict(outcomes)
    else:
        _assert_race_was_live(outcomes)
    assert not [name for name in os.listdir(lab.box) if name.endswith(".tmp")], "a temporary file was left behind"
    if swap == "folder":  # the swapper stops with the real folder in place
        expected = "old" if mode == "read-only" or record else "written"
        assert (lab.box / "new.txt").read_text() == expected
