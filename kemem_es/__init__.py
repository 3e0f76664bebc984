"""kemem-es: memory retrieval for Chinese companion chat on Elasticsearch / OpenSearch.

The public surface is ``__all__``. Names load on first use (PEP 562): ``import kemem_es`` stays
cheap for a CLI, a server's import or a type checker, and ``from kemem_es import Kemem`` loads
what the Memory API needs then.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name → module that defines it (``Memory``: the original design's name for ``Kemem``)
_ERRORS = (
    "KememError",
    "EngineUnavailable",
    "DeadlineExceeded",
    "Overloaded",
    "EngineRefused",
    "EngineSetupError",
    "MappingConflict",
    "InvalidInput",
    "ExtractionError",
    "ExtractorNotConfigured",
    "ExtractionPending",
    "ConcurrentChange",
    "Forbidden",
    "NotFound",
    "Closed",
    "WrongEventLoop",
    "WriteInterrupted",
)
_WHERE: dict[str, tuple[str, str]] = {
    "Kemem": ("kemem_es.kemem", "Kemem"),
    "Memory": ("kemem_es.kemem", "Kemem"),
    "AsyncKemem": ("kemem_es.async_kemem", "AsyncKemem"),
    "Settings": ("kemem_es.config", "Settings"),
    "EventRecord": ("kemem_es.models", "EventRecord"),
    "EntityRecord": ("kemem_es.models", "EntityRecord"),
    "QueryResponse": ("kemem_es.contract.response", "QueryResponse"),
    **{name: ("kemem_es.errors", name) for name in _ERRORS},
}

__all__ = [
    "AsyncKemem",
    "Closed",
    "ConcurrentChange",
    "DeadlineExceeded",
    "EngineRefused",
    "EngineSetupError",
    "EngineUnavailable",
    "EntityRecord",
    "EventRecord",
    "ExtractionError",
    "ExtractionPending",
    "ExtractorNotConfigured",
    "Forbidden",
    "InvalidInput",
    "Kemem",
    "KememError",
    "MappingConflict",
    "Memory",
    "NotFound",
    "Overloaded",
    "QueryResponse",
    "Settings",
    "WriteInterrupted",
    "WrongEventLoop",
    "__version__",
]

if TYPE_CHECKING:  # what type checkers and IDEs see: the real classes
    from kemem_es.async_kemem import AsyncKemem
    from kemem_es.config import Settings
    from kemem_es.contract.response import QueryResponse
    from kemem_es.errors import (
        Closed,
        ConcurrentChange,
        DeadlineExceeded,
        EngineRefused,
        EngineSetupError,
        EngineUnavailable,
        ExtractionError,
        ExtractionPending,
        ExtractorNotConfigured,
        Forbidden,
        InvalidInput,
        KememError,
        MappingConflict,
        NotFound,
        Overloaded,
        WriteInterrupted,
        WrongEventLoop,
    )
    from kemem_es.kemem import Kemem
    from kemem_es.kemem import Kemem as Memory
    from kemem_es.models import EntityRecord, EventRecord


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'kemem_es' has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
