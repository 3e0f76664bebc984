"""Index templates (JSON data in ``kemem_es/index_templates``) and their idempotent install.

Each (database, kind) pair gets an alias ``{prefix}-{db}-{kind}`` over a concrete index
``{alias}-v{template_version}``, plus a composable index template for ``{alias}-*`` so that
later indices (rollover, re-index) get the same mapping. The history index is installed the
same way. Several processes may run ``install`` at once: an index another one just created
counts as existing.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from kemem_es.engine.client import Engine
from kemem_es.errors import EngineRefused, MappingConflict
from kemem_es.models import Database, MemoryKind
from kemem_es.store.embedding import META_KEY, refuse_other_model
from kemem_es.store.layout import (
    DATABASES,
    FACT_FIELDS,
    KINDS,
    SENTENCE_CODES_FIELD,
    STRENGTH_KEY_FIELD,
    VECTOR_CODE_FIELD,
    VECTOR_FIELD,
    history_alias,
    index_alias,
    users_alias,
)

HISTORY = "history"
USERS = "users"
# Fields a later release added to a template version: an index of that version without them is
# given them in place (an added field changes nothing that is stored); its older documents
# simply lack them until they are written again or `kemem-es migrate` fills them in.
ADDED_FIELDS = frozenset(
    {VECTOR_CODE_FIELD, SENTENCE_CODES_FIELD, STRENGTH_KEY_FIELD, *FACT_FIELDS}
)


@cache
def _load(name: str) -> dict[str, Any]:
    text = (resources.files("kemem_es") / "index_templates" / name).read_text(encoding="utf-8")
    return json.loads(text)


def template_version(kind: str) -> int:
    return int(_load(f"{kind}.json")["template_version"])


def concrete_index(prefix: str, db: Database, kind: MemoryKind) -> str:
    return f"{index_alias(prefix, db, kind)}-v{template_version(kind)}"


ROUTING = "scope"  # _meta.kemem_routing of indices whose documents are routed by Scope.routing
CUSTOM_ANALYZER = "kemem_ws"  # whitespace + lowercase: the tokens are lowercase already


def index_body(
    kind: MemoryKind,
    dialect: str,
    dims: int,
    quantization: str = "none",
    shards: int = 1,
    replicas: int = 0,
    embedding: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Settings + mappings for one kind on one dialect, with the model's vector dimension
    (and, given ``embedding``, the model's calibration in ``_meta``: store.embedding).

    Documents are routed by their scope, and the engine refuses a write, get or update that
    does not say its routing (``_routing.required``): a forgotten route would put a memory on
    a shard where its scope's requests never look.

    ``quantization="int8"``: the HNSW graph is built and searched over int8 scalar-quantised
    copies of the vectors (a quarter of the memory the graph search touches); the float vectors
    stay in the index, so the fused score's cosine (a script over the floats) is unchanged —
    only which neighbours the ANN clause finds can differ."""
    base = copy.deepcopy(_load(f"{kind}.json"))
    extra = copy.deepcopy(_load(f"dialects/{dialect}.json"))
    vector: dict[str, Any] = {k: (dims if v == "{dims}" else v) for k, v in extra["vector"].items()}
    if quantization == "int8":
        if dialect == "opensearch":
            vector["method"]["parameters"]["encoder"] = {"name": "sq"}
        else:
            vector["index_options"]["type"] = "int8_hnsw"
    elif quantization != "none":
        raise ValueError(f"unknown vector quantization {quantization!r} (none or int8)")
    mappings = base["mappings"]
    analyzer = extra.get("text_analyzer")
    if analyzer:  # a built-in analyzer instead of the custom one (see dialects/*.json)
        base["settings"].pop("analysis", None)
        for spec in mappings["properties"].values():
            if spec.get("analyzer") == CUSTOM_ANALYZER:
                spec["analyzer"] = analyzer
    mappings["properties"][VECTOR_FIELD] = vector
    mappings["_routing"] = {"required": True}
    mappings["_meta"] = {
        "kemem_template_version": base["template_version"],
        "kemem_kind": kind,
        "embedding_dims": dims,
        "kemem_routing": ROUTING,
    }
    if embedding is not None:
        mappings["_meta"][META_KEY] = embedding
    sizing = {"number_of_shards": shards, "number_of_replicas": replicas}
    return {"settings": {**base["settings"], **extra["settings"], **sizing}, "mappings": mappings}


def memory_index_body(
    engine: Engine,
    db: Database,
    kind: MemoryKind,
    dims: int,
    embedding: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``index_body`` with this installation's choices (quantisation, shards, replicas)."""
    s = engine.settings
    shards = s.user_shards if db == "user" else s.official_shards
    return index_body(
        kind, engine.dialect.name, dims, s.vector_quantization, shards, s.replicas, embedding
    )


@dataclass
class InitResult:
    alias: str
    index: str
    action: str  # "created" | "exists"


def _create(engine: Engine, index: str, body: dict[str, Any]) -> str:
    """Create an index; losing a race to another installer is fine (same template)."""
    try:
        engine.create_index(index, body)
    except EngineRefused as exc:
        if "already_exists" in exc.reason:
            return "exists"
        raise
    return "created"


def put_template(engine: Engine, alias: str, body: dict[str, Any]) -> None:
    engine.put_index_template(
        alias,
        {
            "index_patterns": [f"{alias}-*"],
            "priority": 100,
            "template": body,
            "_meta": body["mappings"]["_meta"],
        },
    )


def install_history(engine: Engine) -> InitResult:
    """The history index (one per prefix): idempotent like the memory indices."""
    return _install_aux(engine, HISTORY, history_alias(engine.settings.index_prefix))


def install_users(engine: Engine) -> InitResult:
    """The per-user lifecycle state index (one per prefix)."""
    return _install_aux(engine, USERS, users_alias(engine.settings.index_prefix))


def _install_aux(engine: Engine, name: str, alias: str) -> InitResult:
    index = f"{alias}-v{template_version(name)}"
    base = copy.deepcopy(_load(f"{name}.json"))
    body = {
        "settings": {**base["settings"], "number_of_replicas": engine.settings.replicas},
        "mappings": {
            **base["mappings"],
            "_meta": {"kemem_template_version": base["template_version"], "kemem_kind": name},
        },
    }
    put_template(engine, alias, body)
    if engine.index_exists(alias):
        return InitResult(alias, index, "exists")
    action = _create(engine, index, {**body, "aliases": {alias: {"is_write_index": True}}})
    return InitResult(alias, index, action)


def install(
    engine: Engine,
    dims: int,
    dbs: tuple[Database, ...] = DATABASES,
    kinds: tuple[MemoryKind, ...] = KINDS,
    recreate: bool = False,
    embedding: dict[str, Any] | None = None,
) -> list[InitResult]:
    """Install templates and indices; re-running changes nothing, a clash is refused (an
    index of another embedding model too, when ``embedding`` says which model this is)."""
    prefix = engine.settings.index_prefix
    results = []
    for db in dbs:
        for kind in kinds:
            alias = index_alias(prefix, db, kind)
            index = concrete_index(prefix, db, kind)
            body = memory_index_body(engine, db, kind, dims, embedding)
            if recreate and engine.index_exists(alias):
                for existing in engine.get_index(alias):
                    engine.delete_index(existing)
            exists = engine.index_exists(alias)
            if exists:
                check_compatible(engine, alias, body)
            put_template(engine, alias, body)
            if exists:
                results.append(InitResult(alias, index, "exists"))
                continue
            action = _create(engine, index, {**body, "aliases": {alias: {"is_write_index": True}}})
            results.append(InitResult(alias, index, action))
    for aux in (history_alias(prefix), users_alias(prefix)):
        if recreate and engine.index_exists(aux):
            for existing in engine.get_index(aux):
                engine.delete_index(existing)
    results.append(install_history(engine))
    results.append(install_users(engine))
    return results


def check_compatible(engine: Engine, alias: str, wanted: dict[str, Any]) -> None:
    """Refuse to write into an index whose mapping disagrees with ours on any field we use."""
    for name, existing in engine.get_index(alias).items():
        mapping = existing.get("mappings", {})
        have = mapping.get("properties", {})
        problems = []
        meta = mapping.get("_meta", {})
        want_meta = wanted["mappings"]["_meta"]
        if isinstance(want_meta.get(META_KEY), dict) and isinstance(meta.get(META_KEY), dict):
            refuse_other_model(meta[META_KEY], want_meta[META_KEY]["model"], f"index {name}")
        if meta.get("kemem_template_version") == 1 and want_meta["kemem_template_version"] == 2:
            raise MappingConflict(
                f"index {name} (alias {alias}) was written by an older kemem-es whose memory ids "
                "were global (one tenant's id could overwrite another's). This version keeps "
                "ids per scope and will not mix the two: run `kemem-es migrate` to copy it "
                "into the new layout, or re-index your files under another KEMEM_INDEX_PREFIX."
            )
        shards = int(existing.get("settings", {}).get("index", {}).get("number_of_shards", 1))
        if shards > 1 and meta.get("kemem_routing") != ROUTING:
            raise MappingConflict(
                f"index {name} (alias {alias}) has {shards} shards and was written before "
                "memories were routed by scope: a memory's shard there follows its id, so "
                "routed reads would miss it. Run `kemem-es migrate` to copy it into a routed "
                "index (the old one is kept), or re-index under another KEMEM_INDEX_PREFIX."
            )
        if meta.get("kemem_template_version") != want_meta["kemem_template_version"]:
            problems.append(
                f"template version {meta.get('kemem_template_version')} "
                f"(this kemem-es writes {want_meta['kemem_template_version']})"
            )
        added: dict[str, Any] = {}
        for field, spec in wanted["mappings"]["properties"].items():
            got = have.get(field)
            if got is None and field in ADDED_FIELDS:
                added[field] = spec
            elif got is None:
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
        if added:
            engine.put_mapping(name, added)


def ensure_compatible(
    engine: Engine,
    dims: int,
    db: Database,
    kind: MemoryKind,
    embedding: Callable[[], dict[str, Any] | None] | None = None,
    model: str | None = None,
) -> None:
    """Before writing: the index is installed if missing (with the model's calibration,
    ``embedding()``), and refused if it was built from another template version, for another
    vector size or from another embedding model (no silent mix)."""
    alias = index_alias(engine.settings.index_prefix, db, kind)
    prefix = engine.settings.index_prefix
    if not all(engine.index_exists(a) for a in (alias, history_alias(prefix), users_alias(prefix))):
        # Both kinds of the database (idempotent for one that exists): a fresh prefix written
        # without ``init`` lists and counts over both kinds (issue 40), while a listing over
        # an index deleted under a running server still says "run init".
        cal = embedding() if embedding is not None else None
        install(engine, dims, dbs=(db,), kinds=KINDS, embedding=cal)
        return
    named = {"model": model} if model else None  # the check needs the name only
    check_compatible(engine, alias, memory_index_body(engine, db, kind, dims, named))
