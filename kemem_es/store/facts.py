"""The store side of facts that change (docs/facts.md): the current memories of a subject and
slot (the candidates a new fact may supersede), and the filter that keeps superseded memories
out of recall."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from kemem_es.engine.client import Engine, Search
from kemem_es.engine.errors import raise_engine_error
from kemem_es.errors import activity
from kemem_es.models import MemoryKind
from kemem_es.store.layout import (
    HEAVY_FIELDS,
    ID_FIELD,
    SLOTS_FIELD,
    SUBJECT_FIELD,
    SUPERSEDED_BY,
    index_alias,
    users_alias,
)
from kemem_es.store.scope import Scope
from kemem_es.store.users import state_id, utc_iso

HOLDERS = 20  # current memories of one subject and slot looked at per write


def current_only() -> dict[str, Any]:
    """A filter clause: memories no newer fact has superseded."""
    return {"bool": {"must_not": [{"exists": {"field": SUPERSEDED_BY}}]}}


JUDGE_CANDIDATES = 30
SLOT_DOING = "looking for facts of the same slot"
JUDGE_DOING = "reading the memories to judge against"


class Facts:
    """The fact lookups of one engine (memory/ reaches the engine only through store/)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def slot_holders(
        self, items: Sequence[tuple[Scope, MemoryKind, str, Sequence[str], str]]
    ) -> list[list[dict[str, Any]]]:
        """For each (scope, kind, subject, slots, own id): the current memories of that scope
        and kind about the same subject holding any of the slots (sources, the own id left
        out), in one round trip. Only within the scope: never across users, agents or
        databases."""
        if not items:
            return []
        prefix = self.engine.settings.index_prefix
        searches: list[Search] = []
        for scope, kind, subject, slots, own in items:
            body = {
                "size": HOLDERS,
                "query": {
                    "bool": {
                        "filter": [
                            *scope.filters(),
                            {"term": {SUBJECT_FIELD: subject}},
                            {"terms": {SLOTS_FIELD: list(slots)}},
                            current_only(),
                        ],
                        "must_not": [{"term": {ID_FIELD: own}}],
                    }
                },
                "_source": {"excludes": HEAVY_FIELDS},
            }
            searches.append((index_alias(prefix, scope.db, kind), body, scope.routing))
        with activity(SLOT_DOING):
            responses = self.engine.msearch(searches)
        out: list[list[dict[str, Any]]] = []
        for (scope, *_), resp in zip(items, responses, strict=True):
            if "error" in resp:  # a write must not pass a failed lookup as "none found"
                raise_engine_error(resp, SLOT_DOING)
            hits = resp.get("hits", {}).get("hits", [])
            out.append([h["_source"] for h in hits if scope.owns(h["_source"])])
        return out

    def current_entities(self, scope: Scope, size: int = JUDGE_CANDIDATES) -> list[dict[str, Any]]:
        """The scope's current (not superseded) entity memories, newest first: what an LLM
        judge of facts that change is shown (``memory.extract.judge``), and what consolidation
        groups (``memory.consolidate``). Empty when the index is missing."""
        body = {
            "size": size,
            "sort": [{"updatetime": "desc"}],
            "query": {"bool": {"filter": [*scope.filters(), current_only()]}},
            "_source": {"excludes": HEAVY_FIELDS},
        }
        alias = index_alias(self.engine.settings.index_prefix, scope.db, "entities")
        with activity(JUDGE_DOING):
            (resp,) = self.engine.msearch([(alias, body, scope.routing)])
        if "error" in resp:
            if "index_not_found" in str(resp["error"]):
                return []
            raise_engine_error(resp, JUDGE_DOING)
        return [h["_source"] for h in resp["hits"]["hits"] if scope.owns(h["_source"])]

    def record_pass(self, scope: Scope, field: str, at: datetime) -> None:
        """A user's state (``{prefix}-users``, the clean-up's document) records ``field`` =
        ``at``: when consolidation last ran for them."""
        doc = {"agent_id": scope.agent_id, "user_id": scope.user_id, field: utc_iso(at)}
        lines: list[dict[str, Any]] = [
            {"update": {"_index": users_alias(self.engine.settings.index_prefix),
                        "_id": state_id(scope), "retry_on_conflict": 10}},
            {"doc": doc, "doc_as_upsert": True},
        ]  # fmt: skip
        self.engine.bulk(lines, refresh=True)
