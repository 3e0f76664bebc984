"""Moving indices written by template version 1 (global ids) into version 2 (ids per scope).

Version 1 used the caller's id (or a content hash) as the engine ``_id``, shared by every
tenant. Version 2 derives the ``_id`` from the scope and that id. Migration copies each
document into a new ``-v2`` index under its scoped id, then moves the alias in one atomic
step; the old index is kept (``drop_old`` deletes it) so nothing is lost if anything is wrong.
Documents that break the scope rule (an official memory with a user, a user memory without
one: possible under version 1) are not copied; they are counted and stay in the old index.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kemem_es.engine.client import Engine, engine_errors
from kemem_es.errors import KememError
from kemem_es.models import Database, MemoryKind
from kemem_es.store.documents import meta_entries
from kemem_es.store.layout import DATABASES, KINDS, UID_FIELD, index_alias
from kemem_es.store.scope import Scope
from kemem_es.store.templates import (
    concrete_index,
    index_body,
    install_history,
    install_users,
    put_template,
)

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


def v1_indices(engine: Engine) -> list[tuple[Database, MemoryKind, str]]:
    """(db, kind, concrete index) of every alias still on version 1."""
    out = []
    prefix = engine.settings.index_prefix
    for db in DATABASES:
        for kind in KINDS:
            alias = index_alias(prefix, db, kind)
            if not engine.index_exists(alias):
                continue
            for name, spec in engine.get_index(alias).items():
                meta = spec.get("mappings", {}).get("_meta", {})
                if meta.get("kemem_template_version") == OLD_VERSION:
                    out.append((db, kind, name))
    return out


def _scan(engine: Engine, index: str) -> Iterator[list[dict[str, Any]]]:
    after: list[Any] | None = None
    while True:
        body: dict[str, Any] = {"size": PAGE, "sort": [{"id": "asc"}], "query": {"match_all": {}}}
        if after:
            body["search_after"] = after
        hits = engine.search(index, body)["hits"]["hits"]
        if not hits:
            return
        yield hits
        after = hits[-1]["sort"]


def _convert(db: Database, source: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    scope = Scope.of(agent_id=source.get("agent_id"), user_id=source.get("user_id"), db=db)
    doc = dict(source)
    memory_id = str(doc.get("id", ""))
    doc["db"] = db
    doc[UID_FIELD] = scope.doc_id(memory_id)
    doc["meta"] = meta_entries(doc.get("metadata") or {})
    return scope.doc_id(memory_id), doc


def migrate(engine: Engine, dims: int, drop_old: bool = False) -> list[MigrationReport]:
    """Copy every version-1 index of this prefix into version 2 and move its alias."""
    reports = []
    with engine_errors("migrating"):
        install_history(engine)
        install_users(engine)
        for db, kind, old in v1_indices(engine):
            alias = index_alias(engine.settings.index_prefix, db, kind)
            new = concrete_index(engine.settings.index_prefix, db, kind)
            rep = MigrationReport(alias, old, new)
            body = index_body(kind, engine.dialect, dims)
            put_template(engine, alias, body)
            if not engine.index_exists(new):
                engine.create_index(new, body)
            for hits in _scan(engine, old):
                lines: list[dict[str, Any]] = []
                for h in hits:
                    try:
                        doc_id, doc = _convert(db, h["_source"])
                    except KememError as exc:
                        rep.skipped.append(f"{h['_id']}: {exc}")
                        continue
                    lines += [{"index": {"_index": new, "_id": doc_id}}, doc]
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
