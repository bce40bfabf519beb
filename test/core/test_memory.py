"""MemoryManager access modes and path checks, and the common file tools built on them."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from rpent.memory import MemoryAccess, MemoryAccessError, MemoryManager, get_memory_dir
from rpent.tools import Toolkit
from rpent.tools.images import decode_png, encode_png


@pytest.fixture
def memory_root(tmp_path):
    root = tmp_path / "memory"
    (root / "inbox").mkdir(parents=True)
    (root / "notes.md").write_text("cube is red")
    return root


def test_memory_dir_default_and_override(monkeypatch, tmp_path):
    monkeypatch.delenv("RPENT_MEMORY_DIR", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert get_memory_dir("franka") == tmp_path / "xdg" / "rpent" / "memory" / "franka"
    monkeypatch.setenv("RPENT_MEMORY_DIR", str(tmp_path / "lab"))
    assert get_memory_dir("franka") == tmp_path / "lab" / "franka"
    with pytest.raises(ValueError, match="robot_name"):
        get_memory_dir("../etc")


def test_read_write_mode_reads_and_writes_inside_the_root(memory_root):
    memory = MemoryManager(memory_root, MemoryAccess.READ_WRITE)
    assert memory.authorize_read("notes.md") == memory_root.resolve() / "notes.md"
    assert memory.authorize_write("sub/new.md") == memory_root.resolve() / "sub" / "new.md"


def test_read_only_mode_refuses_writes(memory_root):
    memory = MemoryManager(memory_root, "read-only")
    assert memory.authorize_read("notes.md").name == "notes.md"
    with pytest.raises(MemoryAccessError, match="read-only"):
        memory.authorize_write("notes.md")


def test_inbox_write_mode_reads_everywhere_and_writes_only_in_the_inbox(memory_root):
    memory = MemoryManager(memory_root, MemoryAccess.INBOX_WRITE)
    assert memory.authorize_read("notes.md").name == "notes.md"
    assert memory.authorize_write("inbox/run1/recipe.jsonl").parent.name == "run1"
    with pytest.raises(MemoryAccessError, match="inbox"):
        memory.authorize_write("notes.md")


@pytest.mark.parametrize("path", ["../outside.txt", "inbox/../../outside.txt", "/etc/passwd"])
def test_paths_escaping_the_root_are_refused(memory_root, path):
    memory = MemoryManager(memory_root)
    with pytest.raises(MemoryAccessError, match="only under"):
        memory.authorize_read(path)
    with pytest.raises(MemoryAccessError):
        memory.authorize_write(path)


def test_symlinks_that_escape_are_refused(memory_root, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("key")
    os.symlink(secret, memory_root / "link.txt")
    os.symlink(tmp_path, memory_root / "dirlink")
    memory = MemoryManager(memory_root)
    with pytest.raises(MemoryAccessError):
        memory.authorize_read("link.txt")
    with pytest.raises(MemoryAccessError):
        memory.authorize_write("dirlink/new.txt")


def test_extra_roots_allow_the_run_output(memory_root, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    memory = MemoryManager(memory_root, "read-only")
    assert memory.authorize_read(out / "a.png", extra_roots=[out]) == (out / "a.png").resolve()
    assert memory.authorize_write(out / "n.txt", extra_roots=[out]) == (out / "n.txt").resolve()


def test_common_tools_honour_the_memory_access_mode(memory_root, tmp_path):
    out = tmp_path / "run"
    kit = Toolkit(memory=MemoryManager(memory_root, "inbox-write"), output_dir=out)
    assert kit.execute_tool("read_text_file", {"path": "notes.md"}).data["text"] == "cube is red"
    refused = kit.execute_tool("write_text_file", {"path": "notes.md", "text": "overwritten"})
    assert refused.is_error and "inbox" in refused.error
    assert (memory_root / "notes.md").read_text() == "cube is red"
    assert not kit.execute_tool("write_text_file", {"path": "inbox/idea.md", "text": "try slower"}).is_error
    assert (memory_root / "inbox" / "idea.md").read_text() == "try slower"
    listing = kit.execute_tool("list_dir", {}).data["entries"]
    assert {"name": "inbox/", "bytes": None} in listing
    escaped = kit.execute_tool("read_text_file", {"path": "../../etc/passwd"})
    assert escaped.is_error and "only under" in escaped.error
    kit.close()


def test_read_image_returns_png_bytes_from_the_output_dir(tmp_path):
    out = tmp_path / "run"
    kit = Toolkit(output_dir=out)  # an output directory must be new or empty when the toolkit opens it
    image = np.zeros((10, 12, 3), np.uint8)
    image[:, :6] = 255
    (out / "view.png").write_bytes(encode_png(image))
    result = kit.execute_tool("read_image", {"path": str(out / "view.png")})
    assert not result.is_error
    assert np.array_equal(decode_png(result.images[0]), image)
    missing = kit.execute_tool("read_image", {"path": str(out / "none.png")})
    assert missing.is_error and "no such file" in missing.error
    kit.close()


def _tree(top: Path) -> dict[str, int | None]:
    """Every name under `top`, with each folder's mtime: a file made and removed again still shows."""
    tree: dict[str, int | None] = {".": top.stat().st_mtime_ns}
    for entry in top.rglob("*"):
        tree[str(entry.relative_to(top))] = entry.lstat().st_mtime_ns if entry.is_dir() else None
    return tree


@pytest.mark.parametrize("mode", ["read-only", "read-write", "inbox-write"])
def test_writing_to_the_output_dir_itself_creates_nothing_anywhere(memory_root, tmp_path, mode):
    out = tmp_path / "run"
    kit = Toolkit(memory=MemoryManager(memory_root, mode), output_dir=out)
    before = _tree(tmp_path)
    refused = kit.execute_tool("write_text_file", {"path": str(out), "text": "x"})
    assert refused.is_error and "path:" in refused.error and "itself" in refused.error
    assert _tree(tmp_path) == before
    kit.close()


@pytest.mark.parametrize(("arguments", "named"), [
    ({"path": "inbox", "text": "x"}, ["path:", "is a folder"]),  # a memory folder, not a file
    ({"path": "inbox/idea.md", "text": "half \ud800"}, ["text:"]),  # text that is not Unicode
], ids=["folder", "not-unicode"])
def test_a_refused_write_creates_nothing_anywhere(memory_root, tmp_path, arguments, named):
    kit = Toolkit(memory=MemoryManager(memory_root, "read-write"))
    before = _tree(tmp_path)
    refused = kit.execute_tool("write_text_file", arguments)
    assert refused.is_error and all(part in refused.error for part in named), refused.error
    assert _tree(tmp_path) == before
    kit.close()


@pytest.mark.parametrize(("path", "rule"), [
    ("\ud800", "Unicode"), ("inbox/\udc80.md", "Unicode"), ("a\x00b", "NUL"), ("inbox/" + "n" * 256, "at most 255"),
])
def test_a_path_that_names_no_real_file_is_refused_before_anything_is_written(memory_root, tmp_path, path, rule):
    kit = Toolkit(memory=MemoryManager(memory_root, "read-write"))
    before = _tree(tmp_path)
    for name, arguments in [("write_text_file", {"path": path, "text": "x"}), ("read_text_file", {"path": path})]:
        refused = kit.execute_tool(name, arguments)
        assert refused.is_error and refused.error.startswith("ValueError: path:") and rule in refused.error
    assert _tree(tmp_path) == before
    kit.close()


def test_symbolic_links_are_refused_even_when_they_stay_inside(memory_root):
    os.symlink(memory_root / "notes.md", memory_root / "alias.md")
    os.symlink(memory_root / "inbox", memory_root / "inbox-alias")
    kit = Toolkit(memory=MemoryManager(memory_root, "read-write"))
    read = kit.execute_tool("read_text_file", {"path": "alias.md"})
    assert read.is_error and "path: 'alias.md': 'alias.md' is a symbolic link" in read.error
    written = kit.execute_tool("write_text_file", {"path": "inbox-alias/idea.md", "text": "x"})
    assert written.is_error and "path: 'inbox-alias/idea.md': 'inbox-alias' is a symbolic link" in written.error
    assert not (memory_root / "inbox" / "idea.md").exists()
    assert (memory_root / "notes.md").read_text() == "cube is red"
    kit.close()


def test_list_dir_shows_links_as_links_without_looking_through_them(memory_root, tmp_path):
    big = tmp_path / "outside.bin"
    big.write_bytes(b"x" * 12345)
    os.symlink(big, memory_root / "outside-link")
    kit = Toolkit(memory=MemoryManager(memory_root, "read-only"))
    entries = kit.execute_tool("list_dir", {}).data["entries"]
    assert {"name": "outside-link@", "bytes": None} in entries
    assert {"name": "notes.md", "bytes": len("cube is red")} in entries
    kit.close()


def test_a_fifo_is_refused_at_once_instead_of_waiting_for_a_writer(memory_root):
    os.mkfifo(memory_root / "pipe")
    kit = Toolkit(memory=MemoryManager(memory_root, "read-only"))
    results = []
    reader = threading.Thread(target=lambda: results.append(kit.execute_tool("read_text_file", {"path": "pipe"})))
    reader.start()
    reader.join(10)
    if reader.is_alive():  # unblock the reader so the test run ends, then fail
        os.close(os.open(memory_root / "pipe", os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
        pytest.fail("reading a FIFO waited for a writer")
    assert results[0].is_error and "not a regular file" in results[0].error
    kit.close()


def test_hard_linked_files_are_neither_read_nor_written(memory_root, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("key")
    os.link(secret, memory_root / "inbox" / "alias.txt")
    kit = Toolkit(memory=MemoryManager(memory_root, "inbox-write"))
    read = kit.execute_tool("read_text_file", {"path": "inbox/alias.txt"})
    assert read.is_error and "hard links" in read.error
    written = kit.execute_tool("write_text_file", {"path": "inbox/alias.txt", "text": "changed"})
    assert written.is_error and "hard links" in written.error
    assert secret.read_text() == "key"
    kit.close()


def test_an_absolute_path_may_spell_the_root_as_configured_or_resolved(tmp_path, memory_root):
    os.symlink(tmp_path, tmp_path.parent / f"{tmp_path.name}-alias")
    configured = tmp_path.parent / f"{tmp_path.name}-alias" / "memory"
    kit = Toolkit(memory=MemoryManager(configured, "read-write"))
    for path in ["notes.md", str(configured / "notes.md"), str(memory_root.resolve() / "notes.md")]:
        assert kit.execute_tool("read_text_file", {"path": path}).data["text"] == "cube is red"
    assert not kit.execute_tool("write_text_file", {"path": str(configured / "inbox" / "n.md"), "text": "x"}).is_error
    assert (memory_root / "inbox" / "n.md").read_text() == "x"
    kit.close()


@pytest.mark.parametrize("mode", ["read-only", "read-write", "inbox-write"])
def test_a_tool_call_cannot_replace_the_runs_record(memory_root, tmp_path, mode):
    out = tmp_path / "run"
    kit = Toolkit(memory=MemoryManager(memory_root, mode), output_dir=out)
    assert not kit.execute_tool("list_dir", {"path": str(out)}).is_error  # leaves steps.jsonl a line
    record = (out / "steps.jsonl").read_bytes()
    refused = kit.execute_tool("write_text_file", {"path": str(out / "steps.jsonl"), "text": "wiped"})
    assert refused.is_error and "never replaced" in refused.error
    assert (out / "steps.jsonl").read_bytes().startswith(record)
    # New files in the output directory are still allowed, once.
    assert not kit.execute_tool("write_text_file", {"path": str(out / "notes.md"), "text": "first"}).is_error
    again = kit.execute_tool("write_text_file", {"path": str(out / "notes.md"), "text": "second"})
    assert again.is_error and (out / "notes.md").read_text() == "first"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    kit.close()
