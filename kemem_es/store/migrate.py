"""Moving memory indices into the current layout: ids per scope, documents routed by scope.

Two older layouts are copied:
- template version 1 used the caller's id (or a content hash) as the engine ``_id``, shared by
  every tenant; the copy derives the ``_id`` from the scope and that id;
- indices of several shards written before routing (version 2 without ``_meta.kemem_routing``)
  placed each memory on the shard its ``_id`` hashes to; the copy routes it by its scope, so a
  scoped request finds it on the one shard it reads. (Single-shard indices need no copy: every
  route leads to their one shard.)

Each document goes into a new index under its scoped id and routing, then the alias moves in
one atomic step; the old index is kept (``drop_old`` deletes it) so nothing is lost if anything
is wrong. Documents the current rules refuse are not copied; they are listed with the field and
reason and stay in the old index: the scope rule (an official memory with a user, a user memory
without one), and what version 1 accepted in metadata (nested objects, dotted keys, integers
past 2^53), which every later update of the memory would refuse. Empty optional fields (version
1 stored ``""``) are left out, as a current write leaves them out.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kemem_es.engine.client import Engine, hit_ref
from kemem_es.engine.errors import check_bulk
from kemem_es.errors import InvalidInput, KememError, activity
from kemem_es.models import Database, MemoryKind, check_vector
from kemem_es.store import vector_code
from kemem_es.store.documents import OPTIONAL_TERMS, meta_entries, to_record_data, vector_fields
from kemem_es.store.layout import (
    DATABASES,
    KINDS,
    SENTENCE_CODES_FIELD,
    UID_FIELD,
    VECTOR_CODE_FIELD,
    VECTOR_FIELD,
    index_alias,
)
from kemem_es.store.scope import scope_of_source
from kemem_es.store.templates import (
    ROUTING,
    check_compatible,
    concrete_index,
    install_history,
    install_users,
    memory_index_body,
    put_template,
)
from kemem_es.store.validation import validate_items

OLD_VERSION = 1
PAGE = 500


@dataclass
class MigrationReport:
    alias: str
    old_index: str
    new_index: str
    copied: int = 0
    skipped: list[str] = field(default_factory=list)
    dropped_old: bool = False


def _outdated(spec: dict[str, Any]) -> bool:
    meta = spec.get("mappings", {}).get("_meta", {})
    if meta.get("kemem_template_version") == OLD_VERSION:
        return True
    shards = int(spec.get("settings", {}).get("index", {}).get("number_of_shards", 1))
    return shards > 1 and meta.get("kemem_routing") != ROUTING


def outdated_indices(engine: Engine) -> list[tuple[Database, MemoryKind, str]]:
    """(db, kind, concrete index) of every alias still on version 1, or sharded unrouted."""
    out = []
    prefix = engine.settings.index_prefix
    for db in DATABASES:
        for kind in KINDS:
            alias = index_alias(prefix, db, kind)
            if not engine.index_exists(alias):
                continue
            for name, spec in engine.get_index(alias).items():
                if _outdated(spec):
                    out.append((db, kind, name))
    return out


def pages(
    engine: Engine, index: str, key: str, size: int = PAGE, **body_extra: Any
) -> Iterator[list[dict[str, Any]]]:
    """Every document (or those of ``query`` in ``body_extra``), in pages sorted by ``key``
    (unique in the index), with ``search_after``: never a scroll (one that fetches vectors
    breaks OpenSearch 3.5's k-NN reader, docs/operations.md)."""
    after: list[Any] | None = None
    while True:
        body: dict[str, Any] = {
            "size": size, "sort": [{key: "asc"}], "query": {"match_all": {}}, **body_extra
        }  # fmt: skip
        if after:
            body["search_after"] = after
        hits = engine.search(index, body)["hits"]["hits"]
        if not hits:
            return
        yield hits
        after = hits[-1]["sort"]


def _convert(
    db: Database, kind: MemoryKind, source: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(bulk action meta without the index, document) of one memory in the current layout;
    InvalidInput (naming the field) for one the current rules refuse."""
    scope = scope_of_source(db, source)
    doc = {
        k: v for k, v in source.items() if v is not None and not (k in OPTIONAL_TERMS and v == "")
    }
    memory_id = str(doc.get("id", ""))
    _, problems = validate_items([("", to_record_data(doc, kind))], kind, db, None)
    if problems:
        why = "; ".join(p.removeprefix(": ") for p in problems)
        raise InvalidInput(f"{why} (stays in the old index: correct it and import it again)")
    doc["db"] = db
    doc[UID_FIELD] = scope.doc_id(memory_id)
    doc["meta"] = meta_entries(doc.get("metadata") or {})
    if doc.get(VECTOR_FIELD):  # written before vectors were stored at unit length
        vector = check_vector(doc[VECTOR_FIELD]) or []
        doc.update(vector_fields(kind, vector, doc.get(SENTENCE_CODES_FIELD)))
    return {"_id": scope.doc_id(memory_id), "routing": scope.routing}, doc


def _target(engine: Engine, db: Database, kind: MemoryKind, old: str) -> str:
    new = concrete_index(engine.settings.index_prefix, db, kind)
    return f"{new}-routed" if new == old else new


def migrate(engine: Engine, dims: int, drop_old: bool = False) -> list[MigrationReport]:
    """Copy every outdated index of this prefix into the current layout and move its alias.
    The new index has the old one's shard count (at least the configured one)."""
    reports = []
    with activity("migrating"):
        install_history(engine)
        install_users(engine)
        for db, kind, old in outdated_indices(engine):
            alias = index_alias(engine.settings.index_prefix, db, kind)
            new = _target(engine, db, kind, old)
            rep = MigrationReport(alias, old, new)
            body = memory_index_body(engine, db, kind, dims)
            old_shards = int(engine.get_index(old)[old]["settings"]["index"]["number_of_shards"])
            sizing = body["settings"]
            sizing["number_of_shards"] = max(old_shards, sizing["number_of_shards"])
            put_template(engine, alias, body)
            if not engine.index_exists(new):
                engine.create_index(new, body)
            # version 1: caller ids were global, so unique; later: the scoped engine id is
            fields = engine.get_index(old)[old]["mappings"]["properties"]
            key = UID_FIELD if UID_FIELD in fields else "id"
            for hits in pages(engine, old, key):
                lines: list[dict[str, Any]] = []
                for h in hits:
                    try:
                        meta, doc = _convert(db, kind, h["_source"])
                    except KememError as exc:
                        rep.skipped.append(f"{h['_id']}: {exc}")
                        continue
                    lines += [{"index": {"_index": new, **meta}}, doc]
                if lines:
                    resp = engine.bulk(lines)
                    bad = [i for i in resp["items"] if i["index"].get("status", 500) >= 300]
                    if bad:
                        reason = bad[0]["index"].get("error", {}).get("reason", "refused")
                        raise KememError(
                            f"migrating {old}: the engine refused {len(bad)} document(s) "
                            f"({reason}); the alias still points at {old}, nothing is lost"
                        )
                    rep.copied += len(lines) // 2
            engine.refresh(new)
            engine.update_aliases(
                [
                    {"remove": {"index": old, "alias": alias}},
                    {"add": {"index": new, "alias": alias, "is_write_index": True}},
                ]
            )
            if drop_old and not rep.skipped:
                engine.delete_index(old)
                rep.dropped_old = True
            reports.append(rep)
    return reports


@dataclass
class CodeReport:
    alias: str
    filled: int = 0


# Event memories with a vector but without its code: stored before codes existed.
WITHOUT_CODE = {
    "bool": {
        "filter": [{"exists": {"field": VECTOR_FIELD}}],
        "must_not": [{"exists": {"field": VECTOR_CODE_FIELD}}],
    }
}


def without_vector_codes(engine: Engine) -> dict[str, int]:
    """How many event memories per alias still lack their vector code (what ``init`` reports,
    so an operator knows to run `kemem-es migrate`)."""
    prefix = engine.settings.index_prefix
    out = {}
    with activity("counting memories without vector codes"):
        for db in DATABASES:
            alias = index_alias(prefix, db, "events")
            if engine.index_exists(alias):
                n = engine.count(alias, WITHOUT_CODE)
                if n:
                    out[alias] = n
    return out


def event_aliases(engine: Engine, dims: int) -> Iterator[str]:
    """The aliases of the event indices there are, each given the fields it lacks first
    (``templates.check_compatible``: added in place, as ``init`` adds them)."""
    for db in DATABASES:
        alias = index_alias(engine.settings.index_prefix, db, "events")
        if engine.index_exists(alias):
            check_compatible(engine, alias, memory_index_body(engine, db, "events", dims))
            yield alias


def fill_vector_codes(engine: Engine, dims: int) -> list[CodeReport]:
    """Event memories stored before vectors had a code (``store.vector_code``) get it, read
    off their stored vector: until then anchor feedback passes them by. The index is given the
    field first (``templates.check_compatible``). One pass in ``uid`` order (``pages``); one
    partial update per memory. No history entry: what the memory says does not change."""
    reports = []
    with activity("filling vector codes"):
        for alias in event_aliases(engine, dims):
            rep = CodeReport(alias)
            found = pages(engine, alias, UID_FIELD, query=WITHOUT_CODE, _source=[VECTOR_FIELD])
            for hits in found:
                lines: list[dict[str, Any]] = []
                for h in hits:
                    code = vector_code.encode(h["_source"][VECTOR_FIELD])
                    lines += [{"update": hit_ref(h)}, {"doc": {VECTOR_CODE_FIELD: code}}]
                check_bulk(engine.bulk(lines), f"filling vector codes in {alias}")
                rep.filled += len(hits)
            if rep.filled:
                engine.refresh(alias)
            if rep.filled:
                reports.append(rep)
    return reports
