"""Moved: the response models are part of the contract (``kemem_es.contract.response``).
These names stay importable from here for code written against earlier versions."""

from kemem_es.contract.response import (
    AdditionalInfo,
    EntityHit,
    EventHit,
    QueryResponse,
    Signals,
    SimpleResponse,
)

__all__ = ["AdditionalInfo", "EntityHit", "EventHit", "QueryResponse", "Signals", "SimpleResponse"]
