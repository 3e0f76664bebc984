"""History that cannot drift from the store: finding and recording what a failed history write
left out (see docs/consistency.md).

The design: **the memory is the truth, its history follows and is repaired from it.** A
memory write and its history entry are two engine requests (the engine has no transaction
across indices). The memory is written first, then its entry; when the entry fails (the
history index read-only, the engine gone between the two), the verb raises and the change
stands unrecorded. Then:

- a retry of the verb records it: ``add`` or ``update`` of what is stored already (a NOOP)
  first checks that the memory's newest history entry other than a NOOP is the stored version
  (its ``content_hash``) and records it (``ADD`` / ``UPDATE``, reason ``recovered``) when not;
  ``delete`` of a memory that is gone records the ``DELETE`` its history lacks and answers as
  the deletion it completes; re-running an import does the same for its unchanged records;
- ``kemem-es doctor`` (``Kemem.repair_history``) scans a scope: every memory whose newest
  entry is not its stored version gets one, every memory its history says exists but the
  store does not gets its ``DELETE`` (reason ``recovered``). Clean-up and ``delete_all`` rely
  on it (a retry of them no longer sees what they deleted).

Why not an intent entry written before the memory and confirmed after: it costs a third write
on every change, and a failed memory write (a conflict, under ordinary concurrency) leaves an
intent for a change that never happened, which readers must then learn to skip. Recording from
the store needs no extra write on the happy path and a check on a NOOP (cached per process).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kemem_es.bounded import Bounded
from kemem_es.contract.memory import Action
from kemem_es.engine.errors import activity, check_bulk, check_shards
from kemem_es.models import Database, MemoryKind
from kemem_es.store import history
from kemem_es.store.layout import (
    HEAVY_FIELDS,
    KINDS,
    SUPERSEDED_BY,
    UID_FIELD,
    history_alias,
    index_alias,
)
from kemem_es.store.scope import Scope, scope_of_source

if TYPE_CHECKING:
    from kemem_es.engine.client import Engine

PAGE = 500
GONE: tuple[Action, ...] = ("DELETE", "FORGET")
RECOVERED = "recovered"

# -- the per-process cache of versions known recorded -------------------------------------------
_KNOWN_MAX = 20_000
_known: Bounded[tuple[str, str], str] = Bounded(_KNOWN_MAX)  # (cluster, uid) → version()


def version(source: dict[str, Any]) -> str | None:
    """What a history entry must record of a stored memory: its content, and whether a newer
    fact superseded it (a mark that changes no text)."""
    content = source.get("content_hash")
    return f"{content}|{source.get(SUPERSEDED_BY) or ''}" if content else None


def known(engine: Engine, uid: str, source: dict[str, Any]) -> bool:
    v = version(source)
    return v is not None and _known.get((engine.url, uid)) == v


def note_recorded(engine: Engine, entries: list[dict[str, Any]]) -> None:
    """History entries written: the versions they record are known recorded."""
    for e in entries:
        key = (engine.url, str(e.get("uid")))
        if e.get("event") in GONE:
            _known.pop(key)
        elif isinstance(e.get("new"), dict) and (v := version(e["new"])):
            _known.put(key, v)


# -- the newest entries -------------------------------------------------------------------------
def newest(engine: Engine, uids: list[str]) -> dict[str, dict[str, Any]]:
    """The newest entry other than a NOOP of each of these memories (engine ids)."""
    if not uids:
        return {}
    body = {
        "size": len(uids),
        "query": {
            "bool": {
                "filter": [{"terms": {"uid": uids}}],
                "must_not": [{"term": {"event": "NOOP"}}],
            }
        },
        "collapse": {"field": "uid"},
        "sort": [{"seq": "desc"}],
        "_source": ["uid", "memory_id", "kind", "event", "seq", "new"],
    }
    with activity("reading history"):
        history.refresh_if_written(engine, engine.read_timeout)
        resp = engine.search(history_alias(engine.settings.index_prefix), body)
    check_shards(resp, "reading history")
    return {h["_source"]["uid"]: h["_source"] for h in resp["hits"]["hits"]}


def records(source: dict[str, Any], entry: dict[str, Any] | None) -> bool:
    """Whether ``entry`` (a memory's newest non-NOOP entry) records the stored ``source``."""
    if entry is None or entry.get("event") in GONE:
        return False
    new = entry.get("new") or {}
    if source.get(SUPERSEDED_BY) != new.get(SUPERSEDED_BY):  # a mark changes no text
        return False
    if source.get("content_hash") and new.get("content_hash"):
        return bool(new["content_hash"] == source["content_hash"])
    return bool(new.get("description") == source.get("description"))  # older entries


def recovered_version(
    scope: Scope, kind: MemoryKind, source: dict[str, Any], last: dict[str, Any] | None,
    actor: str,
) -> dict[str, Any]:  # fmt: skip
    """The entry a stored version lacks: an ADD (no entry, or the last one a deletion), else an
    UPDATE from the last recorded version."""
    if last is None or last.get("event") in GONE:
        return history.entry(
            scope, str(source["id"]), kind, "ADD", actor, new=source, reason=RECOVERED
        )
    return history.entry(
        scope, str(source["id"]), kind, "UPDATE", actor, old=last.get("new") or {}, new=source,
        reason=RECOVERED,
    )  # fmt: skip


def recovered_deletion(scope: Scope, last: dict[str, Any], actor: str) -> dict[str, Any]:
    kind: MemoryKind = "entities" if last.get("kind") == "entities" else "events"
    return history.entry(
        scope, str(last["memory_id"]), kind, "DELETE", actor,
        old=last.get("new") or {}, reason=RECOVERED,
    )  # fmt: skip


def write(engine: Engine, entries: list[dict[str, Any]], doing: str) -> None:
    if not entries:
        return
    with activity(doing):
        resp = history.write(engine, entries)
    check_bulk(resp, doing)
    note_recorded(engine, entries)


def ensure_recorded(
    engine: Engine, scope: Scope, kind: MemoryKind, source: dict[str, Any], actor: str
) -> bool:
    """A retry's check: the stored memory's newest entry is its version, else it is recorded
    now (reason ``recovered``). True when an entry was missing."""
    uid = scope.doc_id(str(source["id"]))
    if known(engine, uid, source):
        return False
    last = newest(engine, [uid]).get(uid)
    if records(source, last):
        note_recorded(engine, [{"uid": uid, "event": "ADD", "new": source}])
        return False
    entry = recovered_version(scope, kind, history.slim(source), last, actor)
    write(engine, [entry], f"recording the missing history of memory {source['id']!r}")
    return True


def unrecorded_deletion(engine: Engine, scope: Scope, memory_id: str) -> dict[str, Any] | None:
    """For a memory that is gone: its newest entry when that says it still exists (its
    deletion was never recorded), else None."""
    uid = scope.doc_id(memory_id)
    last = newest(engine, [uid]).get(uid)
    if last is None or last.get("event") in GONE:
        return None
    return last


# -- the scan -----------------------------------------------------------------------------------
@dataclass
class HistoryRepair:
    """What ``repair_history`` found (and, unless a dry run, recorded): memories whose stored
    version had no entry, deletions with no DELETE entry."""

    memories: int = 0  # memories scanned
    histories: int = 0  # memories with history scanned
    unrecorded_versions: list[str] = field(default_factory=list)  # memory ids
    unrecorded_deletions: list[str] = field(default_factory=list)
    repaired: int = 0
    dry_run: bool = False

    @property
    def consistent(self) -> bool:
        return not self.unrecorded_versions and not self.unrecorded_deletions


def _filters(db: Database, agent_id: str, user_id: str | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"term": {"db": db}}, {"term": {"agent_id": agent_id}}]
    if user_id is not None:
        out.append({"term": {"user_id": user_id}})
    return out


def _pages(engine: Engine, index: str, body: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    page = body
    while True:
        with activity("scanning for the history check"):
            resp = engine.search(index, page, ignore_unavailable=True)
        hits = check_shards(resp, "scanning for the history check")["hits"]["hits"]
        if hits:
            yield hits
        if len(hits) < body["size"]:
            return
        page = body | {"search_after": hits[-1]["sort"]}


def repair_history(
    engine: Engine,
    db: Database,
    agent_id: str,
    user_id: str | None = None,
    dry_run: bool = False,
    actor: str = "doctor",
) -> HistoryRepair:
    """Scan the memories and the history of an agent (one user of it, with ``user_id``) and
    record what the history lacks: each stored version that is not its memory's newest entry,
    each deletion with no DELETE entry (checked again by id before it is recorded: a memory
    added during the scan is not taken for deleted)."""
    prefix = engine.settings.index_prefix
    filters = _filters(db, agent_id, user_id)
    aliases = [index_alias(prefix, db, k) for k in KINDS]
    with activity("refreshing"):
        for alias in aliases:
            if engine.index_exists(alias):
                engine.refresh(alias)
        history.refresh(engine)
    rep = HistoryRepair(dry_run=dry_run)
    # Every memory of the scope: (kind, source) by engine id.
    stored: dict[str, tuple[MemoryKind, dict[str, Any]]] = {}
    for kind, alias in zip(KINDS, aliases, strict=True):
        body = {
            "size": PAGE,
            "query": {"bool": {"filter": filters}},
            "sort": [{UID_FIELD: {"order": "asc"}}],
            "_source": {"excludes": [f for f in HEAVY_FIELDS if f != "content_hash"]},
            "track_total_hits": False,
        }
        for hits in _pages(engine, alias, body):
            for h in hits:
                stored[h["_source"][UID_FIELD]] = (kind, h["_source"])
    # The newest non-NOOP entry of every memory the history knows in the scope.
    last: dict[str, dict[str, Any]] = {}
    body = {
        "size": PAGE,
        "query": {"bool": {"filter": filters, "must_not": [{"term": {"event": "NOOP"}}]}},
        "sort": [{"seq": "asc"}, {"uid": "asc"}],
        "_source": ["uid", "memory_id", "kind", "event", "seq", "new", "db", "agent_id",
                    "user_id"],
        "track_total_hits": False,
    }  # fmt: skip
    for hits in _pages(engine, history_alias(prefix), body):
        for h in hits:
            last[h["_source"]["uid"]] = h["_source"]  # ascending: the newest comes last
    rep.memories, rep.histories = len(stored), len(last)
    entries: list[dict[str, Any]] = []
    for uid, (kind, src) in sorted(stored.items()):
        entry = last.get(uid)
        if not records(src, entry):
            rep.unrecorded_versions.append(str(src.get("id")))
            scope = scope_of_source(db, src)
            entries.append(recovered_version(scope, kind, history.slim(src), entry, actor))
    gone = [e for uid, e in last.items() if uid not in stored and e.get("event") not in GONE]
    if gone:  # checked by id (real time): added during the scan is not deleted
        still = _existing(engine, db, gone)
        for e in gone:
            if e["uid"] in still:
                continue
            rep.unrecorded_deletions.append(str(e.get("memory_id")))
            entries.append(recovered_deletion(scope_of_source(db, e), e, actor))
    if entries and not dry_run:
        for lo in range(0, len(entries), PAGE):
            write(engine, entries[lo : lo + PAGE], "recording the missing history")
        rep.repaired = len(entries)
    return rep


def _existing(engine: Engine, db: Database, entries: list[dict[str, Any]]) -> set[str]:
    prefix = engine.settings.index_prefix
    refs = []
    for e in entries:
        scope = scope_of_source(db, e)
        kind: MemoryKind = "entities" if e.get("kind") == "entities" else "events"
        refs.append((index_alias(prefix, db, kind), e["uid"], scope.routing))
    with activity("reading memories"):
        docs = engine.get_many(refs, excludes=HEAVY_FIELDS)
    return {e["uid"] for e, d in zip(entries, docs, strict=True) if d is not None}
