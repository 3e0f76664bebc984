"""Index templates (JSON data in ``kemem_es/index_templates``) and their idempotent install.

Each (database, kind) pair gets an alias ``{prefix}-{db}-{kind}`` over a concrete index
``{alias}-v{template_version}``, plus a composable index template for ``{alias}-*`` so that
later indices (rollover, re-index) get the same mapping.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, get_args

from kemem_es.engine.client import Engine
from kemem_es.errors import MappingConflict
from kemem_es.models import Database, MemoryKind

DATABASES: tuple[Database, ...] = get_args(Database)
KINDS: tuple[MemoryKind, ...] = get_args(MemoryKind)
VECTOR_FIELD = "vector"


@cache
def _load(name: str) -> dict[str, Any]:
    text = (resources.files("kemem_es") / "index_templates" / name).read_text(encoding="utf-8")
    return json.loads(text)


def template_version(kind: MemoryKind) -> int:
    return int(_load(f"{kind}.json")["template_version"])


def index_alias(prefix: str, db: Database, kind: MemoryKind) -> str:
    return f"{prefix}-{db}-{kind}"


def concrete_index(prefix: str, db: Database, kind: MemoryKind) -> str:
    return f"{index_alias(prefix, db, kind)}-v{template_version(kind)}"


def index_body(kind: MemoryKind, dialect: str, dims: int) -> dict[str, Any]:
    """Settings + mappings for one kind on one dialect, with the model's vector dimension."""
    base = copy.deepcopy(_load(f"{kind}.json"))
    extra = copy.deepcopy(_load(f"dialects/{dialect}.json"))
    vector = {k: (dims if v == "{dims}" else v) for k, v in extra["vector"].items()}
    mappings = base["mappings"]
    mappings["properties"][VECTOR_FIELD] = vector
    mappings["_meta"] = {
        "kemem_template_version": base["template_version"],
        "kemem_kind": kind,
        "embedding_dims": dims,
    }
    return {"settings": {**base["settings"], **extra["settings"]}, "mappings": mappings}


@dataclass
class InitResult:
    alias: str
    index: str
    action: str  # "created" | "exists"


def install(
    engine: Engine,
    dims: int,
    dbs: tuple[Database, ...] = DATABASES,
    kinds: tuple[MemoryKind, ...] = KINDS,
    recreate: bool = False,
) -> list[InitResult]:
    """Install templates and indices; re-running changes nothing, a clash is refused."""
    prefix = engine.settings.index_prefix
    results = []
    for db in dbs:
        for kind in kinds:
            alias = index_alias(prefix, db, kind)
            index = concrete_index(prefix, db, kind)
            body = index_body(kind, engine.dialect, dims)
            if recreate and engine.index_exists(alias):
                for existing in engine.get_index(alias):
                    engine.delete_index(existing)
            exists = engine.index_exists(alias)
            if exists:
                check_compatible(engine, alias, body)
            engine.put_index_template(
                alias,
                {
                    "index_patterns": [f"{alias}-*"],
                    "priority": 100,
                    "template": body,
                    "_meta": body["mappings"]["_meta"],
                },
            )
            if exists:
                results.append(InitResult(alias, index, "exists"))
                continue
            engine.create_index(index, {**body, "aliases": {alias: {"is_write_index": True}}})
            results.append(InitResult(alias, index, "created"))
    return results


def check_compatible(engine: Engine, alias: str, wanted: dict[str, Any]) -> None:
    """Refuse to write into an index whose mapping disagrees with ours on any field we use."""
    for name, existing in engine.get_index(alias).items():
        mapping = existing.get("mappings", {})
        have = mapping.get("properties", {})
        problems = []
        meta = mapping.get("_meta", {})
        want_meta = wanted["mappings"]["_meta"]
        if meta.get("kemem_template_version") != want_meta["kemem_template_version"]:
            problems.append(
                f"template version {meta.get('kemem_template_version')} "
                f"(this kemem-es writes {want_meta['kemem_template_version']})"
            )
        for field, spec in wanted["mappings"]["properties"].items():
            got = have.get(field)
            if got is None:
                problems.append(f"field {field!r} missing")
            elif got.get("type") != spec.get("type"):
                problems.append(f"field {field!r} is {got.get('type')}, wants {spec.get('type')}")
        vec = have.get(VECTOR_FIELD, {})
        got_dims = vec.get("dimension", vec.get("dims"))
        if vec and got_dims != want_meta["embedding_dims"]:
            problems.append(
                f"vector dims {got_dims} but the model gives {want_meta['embedding_dims']}"
            )
        if problems:
            raise MappingConflict(
                f"index {name} (alias {alias}) has an incompatible mapping: "
                + "; ".join(problems[:5])
                + ". Use another KEMEM_INDEX_PREFIX, or `kemem-es init --recreate` "
                "(deletes its data)."
            )
