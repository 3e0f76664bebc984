"""Request and response models shared by the Python API, the CLI and (later) HTTP."""

from kemem_es.contract.memory import AddResult, HistoryEntry, Memory, MemoryPage

__all__ = ["AddResult", "HistoryEntry", "Memory", "MemoryPage"]
