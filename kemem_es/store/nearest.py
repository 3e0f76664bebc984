"""Dedup neighbours: the nearest stored memories of a new record, in its scope and kind.

One filtered k-NN search per record (all in one round trip), rescored as (1 + cos) / 2; for an
entity, only memories about the same entity name (spelled the same, or made of the same words
with the scope's tokenizer) and attribute kind. What counts as a duplicate is memory/dedup.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kemem_es.engine.client import Engine, Search
from kemem_es.engine.errors import raise_engine_error
from kemem_es.errors import activity
from kemem_es.models import EntityRecord, MemoryKind, MemoryRecord
from kemem_es.store.documents import TextTokenizer
from kemem_es.store.layout import HEAVY_FIELDS, VECTOR_FIELD, index_alias
from kemem_es.store.scope import Scope

ENTITY_CANDIDATES = 10  # an entity's nearest attributes whose names share its words, checked
DOING = "looking for duplicates"

Item = tuple[Scope, MemoryRecord, Sequence[float]]


def _filters(scope: Scope, record: MemoryRecord, tok: TextTokenizer | None) -> list[dict[str, Any]]:
    """The scope's filters; for an entity, its kind and its name: spelled the same, or (with
    the scope's tokenizer) made of the same words, a superset that ``dedup.same_entity``
    narrows."""
    filters = scope.filters()
    if isinstance(record, EntityRecord):
        names: list[dict[str, Any]] = [{"term": {"entity_name": record.entity_name}}]
        if tok is not None:
            words = tok.index_text(record.entity_name)
            names.append({"match": {"entity_name_tok": {"query": words, "operator": "and"}}})
        filters += [
            {"bool": {"should": names, "minimum_should_match": 1}},
            {"term": {"kind": record.kind}},
        ]
    return filters


class Neighbours:
    """The nearest-memory search of one engine."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def hits(
        self,
        items: Sequence[Item],
        kind: MemoryKind,
        tokenizers: Mapping[Scope, TextTokenizer] | None = None,
    ) -> list[list[dict[str, Any]]]:
        """Each (scope, record, vector)'s nearest hits, nearest first, ``_score`` =
        (1 + cos) / 2. A failed item raises: a write must not pass a failed duplicate check
        as "none found"."""
        if not items:
            return []
        dialect = self.engine.dialect
        prefix = self.engine.settings.index_prefix
        searches: list[Search] = []
        for scope, record, vector in items:
            tok = (tokenizers or {}).get(scope)
            k = ENTITY_CANDIDATES if isinstance(record, EntityRecord) and tok is not None else 1
            # The graph's own score depends on its space (innerproduct on new OpenSearch
            # indices, cosine on older ones): the nearest is rescored as (1 + cos) / 2.
            filters = _filters(scope, record, tok)
            query: dict[str, Any]
            if dialect.native:  # no script: the knn clause scores (1 + cos) / 2 itself
                query = dialect.vector_clause(VECTOR_FIELD, vector, k, filters, 1.0)
            else:
                query = {
                    "function_score": {
                        "query": dialect.ann_query(VECTOR_FIELD, vector, k, filters),
                        "functions": [dialect.vector_function(VECTOR_FIELD, vector, 1.0)],
                        "boost_mode": "replace",
                    }
                }
            body = {
                "size": k,
                "query": query,
                "_source": {"excludes": [f for f in HEAVY_FIELDS if f != "content_hash"]},
            }
            searches.append((index_alias(prefix, scope.db, kind), body, scope.routing))
        with activity(DOING):
            responses = self.engine.msearch(searches)
        out: list[list[dict[str, Any]]] = []
        for resp in responses:
            if "error" in resp:
                raise_engine_error(resp, DOING)
            out.append(resp.get("hits", {}).get("hits", []))
        return out
