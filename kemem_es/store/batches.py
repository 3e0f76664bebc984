"""Durable pending-extraction records: one document per batch of session messages handed to
extraction, with a lease, so that a batch is extracted exactly once across crashes.

Life of a batch: ``pending`` (created with the window's move, before anything else) →
``claimed`` (a worker holds a lease until ``lease_until``; written with the version it read, so
two workers never both win) → ``extracted`` (the extractor's answer saved, so a crash before the
write does not ask the LLM again) → ``done`` (its memories written). A claim whose lease passed
(the worker died) may be claimed again; ``attempts`` counts the claims.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from kemem_es.engine.errors import check_bulk, check_shards
from kemem_es.errors import ConcurrentChange, activity
from kemem_es.store.documents import utc_now
from kemem_es.store.scope import Scope
from kemem_es.store.sessions import SessionStore, Versioned, batch_key

OPEN = ("pending", "claimed", "extracted")


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Batches:
    """The batch records of the sessions index."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.engine = store.engine

    def _meta(self, scope: Scope, session_id: str, first_seq: int) -> dict[str, Any]:
        key = batch_key(session_id, first_seq)
        return {"_index": self.store.alias, "_id": scope.doc_id(key), "routing": scope.routing}

    def lines(
        self,
        scope: Scope,
        session_id: str,
        first_seq: int,
        last_seq: int,
        reason: str,
        names: Mapping[str, str],
    ) -> list[dict[str, Any]]:
        """The bulk lines that record a pending batch (``create``: recording the same first
        message again changes nothing), to go with the session's write."""
        key = batch_key(session_id, first_seq)
        doc = {
            **self.store._base(scope, session_id, "batch", key),
            "first_seq": first_seq,
            "last_seq": last_seq,
            "reason": reason,
            "status": "pending",
            "attempts": 0,
            "at": utc_now(),
            **names,
        }
        return [{"create": self._meta(scope, session_id, first_seq)}, doc]

    def get(self, scope: Scope, session_id: str, first_seq: int) -> Versioned | None:
        (found,) = self.store.get_docs(scope, [batch_key(session_id, first_seq)])
        return found

    def _write(self, scope: Scope, batch: Versioned, fields: Mapping[str, Any]) -> Versioned:
        """``fields`` over the version read; ConcurrentChange when it changed meanwhile."""
        src = batch.source
        meta = self._meta(scope, src["session_id"], int(src["first_seq"]))
        meta |= {"if_seq_no": batch.seq_no, "if_primary_term": batch.primary_term}
        doc = {**src, **fields}
        with activity("updating a batch"):
            resp = self.engine.bulk([{"index": meta}, doc])
        item = resp["items"][0]["index"]
        if item.get("status") == 409:
            raise ConcurrentChange("the batch changed meanwhile")
        check_bulk(resp, "updating a batch")
        return Versioned(doc, int(item["_seq_no"]), int(item["_primary_term"]))

    def claim(
        self, scope: Scope, batch: Versioned, lease_s: float, now: datetime | None = None
    ) -> Versioned | None:
        """Take the batch for ``lease_s`` seconds; None when it is done, or held by a live
        lease, or another worker claimed it first."""
        src = batch.source
        now = now or datetime.now(timezone.utc)
        if src.get("status") not in OPEN:
            return None
        lease = _parse(src.get("lease_until"))
        if src.get("status") == "claimed" and lease is not None and lease > now:
            return None
        fields = {
            "status": "claimed" if src.get("status") != "extracted" else "extracted",
            "lease_until": _iso(now + timedelta(seconds=lease_s)),
            "attempts": int(src.get("attempts") or 0) + 1,
            "token": uuid.uuid4().hex,
        }
        try:
            return self._write(scope, batch, fields)
        except ConcurrentChange:
            return None

    def extracted(self, scope: Scope, batch: Versioned, result: dict[str, Any]) -> Versioned:
        """The extractor's answer, saved before its memories are written."""
        return self._write(scope, batch, {"status": "extracted", "result": result})

    def done(self, scope: Scope, batch: Versioned, memory_ids: list[str]) -> Versioned:
        return self._write(
            scope, batch, {"status": "done", "memory_ids": memory_ids, "done_at": utc_now()}
        )

    def failed(self, scope: Scope, batch: Versioned, error: str) -> Versioned:
        """A failure keeps the batch open (its lease ends now): a later resume tries again."""
        return self._write(scope, batch, {"error": error[:500], "lease_until": utc_now()})

    def open_batches(self, limit: int = 1000) -> list[tuple[Scope, Versioned]]:
        """Batches not done, of every scope (for a restart's resume), oldest first."""
        if not self.store.exists():
            return []  # no session was ever stored under this prefix
        body = {
            "size": limit,
            "query": {
                "bool": {
                    "filter": [
                        {"term": {"doc_type": "batch"}},
                        {"terms": {"status": list(OPEN)}},
                    ]
                }
            },
            "sort": [{"at": "asc"}],
            "seq_no_primary_term": True,
        }
        with activity("listing open batches"):
            self.engine.refresh(self.store.alias)
            resp = self.engine.search(self.store.alias, body)
        out = []
        for hit in check_shards(resp, "listing open batches")["hits"]["hits"]:
            src = hit["_source"]
            scope = Scope.of(agent_id=src["agent_id"], user_id=src.get("user_id"), db=src["db"])
            out.append((scope, Versioned(src, hit["_seq_no"], hit["_primary_term"])))
        return out
