"""Where memories live: index names and the field names that code outside the store may use.

Each (database, kind) pair has an alias ``{prefix}-{db}-{kind}`` over a concrete index
``{alias}-v{template_version}``; the history of every change lives in ``{prefix}-history``.
"""

from __future__ import annotations

from typing import get_args

from kemem_es.errors import InvalidInput
from kemem_es.models import Database, MemoryKind

DATABASES: tuple[Database, ...] = get_args(Database)
KINDS: tuple[MemoryKind, ...] = get_args(MemoryKind)
_KIND: dict[object, MemoryKind] = {k: k for k in KINDS}


def checked_kind(value: object) -> MemoryKind:
    """A caller's ``kind`` as the Literal; InvalidInput for anything else (a kind names an
    index, so an unknown one must never reach the engine or the template loader)."""
    kind = _KIND.get(value) if isinstance(value, str) else None
    if kind is None:
        raise InvalidInput(f"kind: must be one of {', '.join(KINDS)}, not {value!r}", field="kind")
    return kind


VECTOR_FIELD = "vector"
VECTOR_CODE_FIELD = "vector_code"  # events: the vector as int8 doc values (store.vector_code)
# events: each sentence's own vector as int8 doc values (store.vector_code, search.best_sentence)
SENTENCE_CODES_FIELD = "sentence_codes"
# The strength again, as a date whose distance from the epoch is STRENGTH_KEY_SCALE / strength
# milliseconds: a distance_feature query with pivot SCALE / k then scores exactly
# s / (s + k), the strength term, without a script (native scoring; store.documents).
STRENGTH_KEY_FIELD = "strength_key"
STRENGTH_KEY_SCALE = 1e12
TIME_FIELD = "event_time"  # events: when the episode happened (what time decay measures)
ID_FIELD = "id"  # the caller's memory id, unique within a scope and kind
# Facts that change (docs/facts.md): what a memory is about, and what replaced it.
SLOTS_FIELD = "slots"
SUBJECT_FIELD = "subject"
SUPERSEDED_BY = "superseded_by"
SUPERSEDED_AT = "superseded_at"
FACT_FIELDS = (SLOTS_FIELD, SUBJECT_FIELD, SUPERSEDED_BY, SUPERSEDED_AT)
UID_FIELD = "uid"  # the engine _id, stored as a keyword: the tie-breaker for stable paging
# What hits never need to carry back: the vector, its codes and the token copies of the texts.
HEAVY_FIELDS = [
    VECTOR_FIELD,
    VECTOR_CODE_FIELD,
    SENTENCE_CODES_FIELD,
    "*_tok",
    "content_hash",
    "meta",
]


def index_alias(prefix: str, db: Database, kind: MemoryKind) -> str:
    return f"{prefix}-{db}-{kind}"


def history_alias(prefix: str) -> str:
    return f"{prefix}-history"


def users_alias(prefix: str) -> str:
    """Per-user lifecycle state: last activity, last clean-up."""
    return f"{prefix}-users"


def all_aliases(prefix: str, kinds: tuple[MemoryKind, ...] = KINDS) -> list[str]:
    return [index_alias(prefix, db, kind) for db in DATABASES for kind in kinds]


def kind_of_index(index: str) -> MemoryKind:
    """The memory kind of a concrete index name (as a search hit reports it)."""
    return "entities" if "-entities" in index else "events"
