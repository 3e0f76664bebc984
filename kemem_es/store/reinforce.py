"""Reinforcement writes: recalled memories grow stronger, active users are recorded.

What to write and when (the Ebbinghaus rule, the queue, the background flush) is
memory/strength.py's; this module knows the documents: a recalled memory's (index, ``_id``,
routing), the constant update script, the users index's upserts.
"""

from __future__ import annotations

import logging
from typing import Any

from kemem_es.contract.response import QueryResponse
from kemem_es.engine.client import Engine
from kemem_es.engine.errors import with_remedy
from kemem_es.models import MAX_STRENGTH
from kemem_es.store.layout import index_alias
from kemem_es.store.scope import Scope
from kemem_es.store.users import activity_lines

log = logging.getLogger("kemem_es.memory.strength")

RecallKey = tuple[str, str, str]  # (index alias, engine _id, routing) of a recalled memory

# Constant script source: the amounts and time travel as params, never as source text.
# The strength stops at params.max (MAX_STRENGTH, the bound every write validates): above it a
# memory could no longer be updated, merged into or re-imported.
RECALL_SCRIPT = (
    "def s = ctx._source.strength; "
    "ctx._source.strength = Math.min(params.max, (s == null ? 0.0 : s) + params.gain); "
    "def n = ctx._source.recall_count; "
    "ctx._source.recall_count = (n == null ? 0 : n) + params.n; "
    "ctx._source.last_recalled_at = params.now;"
)


def recall_keys(prefix: str, user: Scope, official: Scope, resp: QueryResponse) -> list[RecallKey]:
    """(index, engine id, routing) of every memory a response returned, events and
    entities."""
    scopes = {"user": user, "official": official}
    keys = []
    for e in resp.memory_events:
        s = scopes[e.db]
        keys.append((index_alias(prefix, s.db, "events"), s.doc_id(e.index), s.routing))
    for n in resp.memory_entities:
        s, mid = scopes[n.db], str(n.index.get("index"))
        keys.append((index_alias(prefix, s.db, "entities"), s.doc_id(mid), s.routing))
    return keys


class Reinforcements:
    """Writes queued recalls and activity in one bulk."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def write(
        self,
        recalls: dict[RecallKey, list[Any]],
        active: dict[str, dict[str, Any]],
        amount: float,
        timeout_s: float | None = None,
    ) -> int:
        """Apply ``recalls`` (key → [times recalled, latest instant], each worth ``amount``)
        and upsert ``active`` (state id → activity fields); returns the items written.
        ``timeout_s`` bounds the call (at shutdown)."""
        lines = _recall_lines(recalls, amount)
        lines += activity_lines(self.engine.settings.index_prefix, active)
        return _count_done(self.engine.bulk(lines, timeout_s=timeout_s))


def _recall_lines(recalls: dict[RecallKey, list[Any]], amount: float) -> list[dict[str, Any]]:
    """A scripted strength update per recalled memory."""
    lines: list[dict[str, Any]] = []
    for (index, doc_id, routing), (n, now) in recalls.items():
        params = {"gain": amount * n, "n": n, "now": now, "max": MAX_STRENGTH}
        meta = {"_index": index, "_id": doc_id, "routing": routing, "retry_on_conflict": 10}
        lines += [
            {"update": meta},
            {"script": {"source": RECALL_SCRIPT, "lang": "painless", "params": params}},
        ]
    return lines


def _count_done(resp: dict[str, Any]) -> int:
    """Items written; a failed one is logged with the engine's words, never the memory's."""
    done = 0
    for item in resp.get("items", []):
        res = item.get("update", {})
        if res.get("status", 500) < 300:
            done += 1
        elif res.get("status") != 404:  # a memory deleted meanwhile needs nothing
            error = res.get("error", {})
            log.warning(
                "reinforcement of one memory failed: status %s %s",
                res.get("status"),
                with_remedy(error.get("type", "") if isinstance(error, dict) else ""),
            )
    return done
