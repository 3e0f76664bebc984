"""Reinforcement writes: recalled memories grow stronger, active users are recorded.

What to write and when (the Ebbinghaus rule, the queue, the background flush) is
memory/strength.py's; this module knows the documents: a recalled memory's (index, ``_id``,
routing), the constant update script, the users index's upserts.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kemem_es.contract.response import QueryResponse
from kemem_es.engine.client import Engine
from kemem_es.engine.errors import deadline, with_remedy
from kemem_es.models import MAX_STRENGTH
from kemem_es.store.documents import MAX_KEY_MS, with_strength_key
from kemem_es.store.layout import STRENGTH_KEY_SCALE, index_alias
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
    "ctx._source.last_recalled_at = params.now; "
    # the strength's key for script-free scoring (store.documents.strength_key)
    # (a long: Math.min over the def-typed param picked the double overload, and a date field
    # refuses 1.9E10)
    "double t = ctx._source.strength; "
    "if (t > 0) { long k = Math.round(params.key_scale / t); long top = (long) params.key_max; "
    "ctx._source.strength_key = k < top ? k : top; }"
)
CONFLICT_ROUNDS = 5  # script-free writes: re-read and retry what another writer changed


def recall_keys(
    prefix: str, user: Scope, official: Scope, resp: QueryResponse, with_official: bool = False
) -> list[RecallKey]:
    """(index, engine id, routing) of every memory a response returned, events and entities:
    the user's, and the agent's official ones only ``with_official`` (``reinforce_official``)."""
    scopes = {"user": user, "official": official}
    keys = []
    for e in resp.memory_events:
        if e.db == "user" or with_official:
            s = scopes[e.db]
            keys.append((index_alias(prefix, s.db, "events"), s.doc_id(e.index), s.routing))
    for n in resp.memory_entities:
        if n.db == "user" or with_official:
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
        users = activity_lines(self.engine.settings.index_prefix, active)
        if not self.engine.painless:
            return _count_done(self._write_without_script(recalls, users, amount, timeout_s))
        lines = _recall_lines(recalls, amount) + users
        return _count_done(self.engine.bulk(lines, timeout_s=timeout_s))

    def _write_without_script(
        self,
        recalls: dict[RecallKey, list[Any]],
        user_lines: list[dict[str, Any]],
        amount: float,
        timeout_s: float | None,
    ) -> dict[str, Any]:
        """The same writes for a cluster without Painless: each memory's new values are
        computed here from the version read and written only onto that version (if_seq_no);
        one changed meanwhile is read again, up to CONFLICT_ROUNDS times. Returns the items
        of every round as one bulk answer."""
        if timeout_s is not None:  # the reads too keep to the call's limit (at shutdown)
            with deadline(timeout_s):
                return self._rounds(recalls, user_lines, amount, time.monotonic() + timeout_s)
        return self._rounds(recalls, user_lines, amount, None)

    def _rounds(
        self,
        recalls: dict[RecallKey, list[Any]],
        user_lines: list[dict[str, Any]],
        amount: float,
        end: float | None,
    ) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        pending = dict(recalls)
        for _ in range(CONFLICT_ROUNDS):
            lines: list[dict[str, Any]] = []
            keys: list[RecallKey] = []
            by_index: dict[str, list[RecallKey]] = {}
            for key in pending:
                by_index.setdefault(key[0], []).append(key)
            for index, keys_of in by_index.items():
                refs = [(doc_id, routing) for _, doc_id, routing in keys_of]
                found = self.engine.mget_versions(index, refs, ["strength", "recall_count"])
                for key in keys_of:
                    if key[1] not in found:  # deleted meanwhile: nothing to reinforce
                        continue
                    source, seq_no, term = found[key[1]]
                    n, now = pending[key]
                    doc = {
                        "strength": min(
                            MAX_STRENGTH, float(source.get("strength") or 0.0) + amount * n
                        ),
                        "recall_count": int(source.get("recall_count") or 0) + n,
                        "last_recalled_at": now,
                    }
                    meta = {"_index": index, "_id": key[1], "routing": key[2],
                            "if_seq_no": seq_no, "if_primary_term": term}  # fmt: skip
                    lines += [{"update": meta}, {"doc": with_strength_key(doc)}]
                    keys.append(key)
            lines, user_lines = lines + user_lines, []
            if not lines:
                break
            left = None if end is None else max(0.05, end - time.monotonic())
            resp = self.engine.bulk(lines, timeout_s=left)
            retry: dict[RecallKey, list[Any]] = {}
            for i, item in enumerate(resp.get("items", [])):
                if i < len(keys) and item.get("update", {}).get("status") == 409:
                    retry[keys[i]] = pending[keys[i]]
                else:
                    items.append(item)
            pending = retry
            if not pending:
                break
        return {"items": items}


def _recall_lines(recalls: dict[RecallKey, list[Any]], amount: float) -> list[dict[str, Any]]:
    """A scripted strength update per recalled memory."""
    lines: list[dict[str, Any]] = []
    for (index, doc_id, routing), (n, now) in recalls.items():
        params = {
            "gain": amount * n, "n": n, "now": now, "max": MAX_STRENGTH,
            "key_scale": STRENGTH_KEY_SCALE, "key_max": MAX_KEY_MS,
        }  # fmt: skip
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
