"""What the bulk writer's parts share: the embedder protocol, a batch of bulk lines, what a
rewritten memory keeps, and the writer's settings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kemem_es.engine.client import Engine
from kemem_es.store.documents import LIFECYCLE_FIELDS, TextTokenizer, with_strength_key
from kemem_es.store.names import ScopeNames

MAX_BULK_BYTES = 8 * 1024 * 1024  # well under the engines' 100 MB default request limit
EXISTING_FIELDS = ["content_hash", "description", "strength", *LIFECYCLE_FIELDS]


class TextEmbedder(Protocol):
    """What the indexer and the query side need of an embedder (``embed.Embedder``, or a
    caller's own model)."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_one(self, text: str) -> np.ndarray: ...


@dataclass
class Batch:
    lines: list[dict[str, Any]]
    labels: dict[str, str]  # engine id → "line N" for error messages
    history: dict[str, dict[str, Any]]  # engine id → its history entry once written
    keep_strength: set[str] = field(default_factory=set)  # rewrites keeping stored strength


def carry_over(doc: dict[str, Any], old: dict[str, Any], keep_strength: bool) -> None:
    """What a rewritten memory keeps of its stored version: recall count, last recall, and its
    strength unless the record sets one."""
    doc.update({f: old[f] for f in LIFECYCLE_FIELDS if f in old})
    if keep_strength and "strength" in old:
        doc["strength"] = old["strength"]
    with_strength_key(doc)


class BulkBase:
    """The engine, the embedder and tokenizer, and the batch limits of one writer."""

    def __init__(
        self,
        engine: Engine,
        embedder: TextEmbedder,
        tokenizer: TextTokenizer,
        batch_size: int = 512,
        max_bytes: int = MAX_BULK_BYTES,
        max_retries: int = 3,
        names: ScopeNames | None = None,
    ) -> None:
        self.engine = engine
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_bytes = max_bytes
        self.max_retries = max_retries
        self.names = names if names is not None else ScopeNames(engine)
