"""MemoryManager access modes and path checks, and the common file tools built on them."""

from __future__ import annotations

import os

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
    out.mkdir()
    image = np.zeros((10, 12, 3), np.uint8)
    image[:, :6] = 255
    (out / "view.png").write_bytes(encode_png(image))
    kit = Toolkit(output_dir=out)
    result = kit.execute_tool("read_image", {"path": str(out / "view.png")})
    assert not result.is_error
    assert np.array_equal(decode_png(result.images[0]), image)
    missing = kit.execute_tool("read_image", {"path": str(out / "none.png")})
    assert missing.is_error and "no such file" in missing.error
    kit.close()
