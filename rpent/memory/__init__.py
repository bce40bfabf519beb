"""A robot's memory directory: notes, recipes and audits the agent may read and (per access mode) write."""

from rpent.memory.manager import MemoryAccess, MemoryAccessError, MemoryManager, get_memory_dir

__all__ = ["MemoryAccess", "MemoryAccessError", "MemoryManager", "get_memory_dir"]
