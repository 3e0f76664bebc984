"""Which model an index's vectors come from, and that model's calibration, kept with the index.

The memory indices' mapping ``_meta.kemem_embedding`` holds ``embed.calibrate.calibration``'s
answer (model name, dimension, measured stats, the query defaults): written at ``init`` (or
when a first write creates the index), read by the searcher so that queries score on the scale
of the model that wrote the vectors. A process whose model is another is refused — the
cosines of two models are not comparable, and a silent mix ranks nonsense.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from kemem_es.engine.client import Engine
from kemem_es.errors import MappingConflict
from kemem_es.store.layout import DATABASES, KINDS, index_alias

META_KEY = "kemem_embedding"


def _aliases(prefix: str) -> list[str]:
    return [index_alias(prefix, db, kind) for db in DATABASES for kind in KINDS]


def stored(engine: Engine) -> dict[str, Any] | None:
    """The calibration the prefix's memory indices were written with (the first index that
    has one), or None when none has (older indices, or none yet)."""
    for alias in _aliases(engine.settings.index_prefix):
        if not engine.index_exists(alias):
            continue
        for existing in engine.get_index(alias).values():
            meta = existing.get("mappings", {}).get("_meta", {})
            if isinstance(meta.get(META_KEY), dict):
                return dict(meta[META_KEY])
    return None


def refuse_other_model(found: dict[str, Any] | None, model: str, where: str) -> None:
    """A clear error when ``found`` (a stored calibration) belongs to another model."""
    if found and found.get("model") and found["model"] != model:
        raise MappingConflict(
            f"{where} holds vectors of the embedding model {found['model']!r}, but this process "
            f"embeds with {model!r}: their cosines cannot be compared, so nothing is mixed. "
            "Configure that model again (KEMEM_MODEL_DIR / KEMEM_MODEL_VARIANT / KEMEM_EMBED_*), "
            "or index under "
            "another KEMEM_INDEX_PREFIX, or `kemem-es init --recreate` (deletes the data)."
        )


def record(engine: Engine, calibration: dict[str, Any]) -> int:
    """Write ``calibration`` into every memory index of the prefix that lacks one (an index
    made before calibration existed) and return how many were written; refuse an index that
    holds another model's."""
    written = 0
    for alias in _aliases(engine.settings.index_prefix):
        if not engine.index_exists(alias):
            continue
        for name, existing in engine.get_index(alias).items():
            meta = dict(existing.get("mappings", {}).get("_meta", {}))
            have = meta.get(META_KEY)
            if isinstance(have, dict):
                refuse_other_model(have, calibration["model"], f"index {name}")
                continue
            meta[META_KEY] = calibration
            put_meta(engine, name, meta)
            written += 1
    return written


def put_meta(engine: Engine, index: str, meta: dict[str, Any]) -> None:
    """Replace an index's mapping ``_meta`` (the engine replaces it whole)."""
    engine.request("PUT", f"/{quote(index, safe='')}/_mapping", body={"_meta": meta})
