"""Request and response models shared by the Python API, the CLI and HTTP: the Memory API's
results (memory.py) and the query's v23 response (response.py)."""

from kemem_es.contract.memory import AddResult, HistoryEntry, Memory, MemoryPage
from kemem_es.contract.response import (
    AdditionalInfo,
    EntityHit,
    EventHit,
    QueryResponse,
    Signals,
    SimpleResponse,
)

__all__ = [
    "AddResult",
    "AdditionalInfo",
    "EntityHit",
    "EventHit",
    "HistoryEntry",
    "Memory",
    "MemoryPage",
    "QueryResponse",
    "Signals",
    "SimpleResponse",
]
