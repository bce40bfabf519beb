"""Publishing a successful run's recipe and audit to the memory inbox: fresh folders, never through a link."""

from __future__ import annotations

import pytest

from rpent.memory import MemoryAccess, MemoryManager
from rpent.memory.manager import MemoryAccessError
from rpent.runner.publish import publish_to_memory


def _record(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe_toy.jsonl").write_text('{"tool": "finish"}\n')
    (run / "result.json").write_text("{}\n")
    return [run / "recipe_toy.jsonl", run / "result.json", run / "missing.json"]


def test_each_publication_gets_a_fresh_folder(tmp_path):
    memory = MemoryManager(tmp_path / "memory", MemoryAccess.INBOX_WRITE)
    files = _record(tmp_path)
    first = publish_to_memory(memory, files, "toy-1")
    second = publish_to_memory(memory, files, "toy-1")
    assert (first.name, second.name) == ("toy-1", "toy-1-2")
    assert sorted(p.name for p in first.iterdir()) == ["recipe_toy.jsonl", "result.json"]
    assert (second / "recipe_toy.jsonl").read_text() == '{"tool": "finish"}\n'


def test_an_inbox_that_is_a_link_is_refused_and_nothing_lands_outside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "inbox").symlink_to(outside)
    memory = MemoryManager(tmp_path / "memory", MemoryAccess.INBOX_WRITE)
    with pytest.raises(MemoryAccessError, match="symbolic link"):
        publish_to_memory(memory, _record(tmp_path), "toy-1")
    assert list(outside.iterdir()) == []


def test_read_only_memory_publishes_nothing(tmp_path):
    memory = MemoryManager(tmp_path / "memory", MemoryAccess.READ_ONLY)
    assert publish_to_memory(memory, _record(tmp_path), "toy-1") is None
    assert not (tmp_path / "memory").exists()
