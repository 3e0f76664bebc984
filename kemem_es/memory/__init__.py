"""The memory lifecycle behind the Memory API: turning input into records, writing, changing
and forgetting them (dedup, reinforcement and clean-up build on this)."""

from kemem_es.memory.service import MemoryService

__all__ = ["MemoryService"]
