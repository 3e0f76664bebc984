"""Request and response models shared by the Python API, the CLI and HTTP: a query's
parameters (params.py), its v23 response (response.py) and the Memory API's results
(memory.py)."""

from kemem_es.contract.memory import AddResult, HistoryEntry, Memory, MemoryPage
from kemem_es.contract.params import EntityWeights, QueryParams, Weights
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
    "EntityWeights",
    "EventHit",
    "HistoryEntry",
    "Memory",
    "MemoryPage",
    "QueryParams",
    "QueryResponse",
    "Signals",
    "SimpleResponse",
    "Weights",
]
