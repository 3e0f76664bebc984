"""Where an event search looks: the query's scope (its filters and routing), the caller's
filters, the events the prompt already shows, and the keyword filter of native scoring."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kemem_es.contract.params import QueryParams
from kemem_es.models import Database
from kemem_es.search.facts import recall_filters
from kemem_es.store.filters import compile_filters
from kemem_es.store.scope import Scope


def query_scope(db: Database, agent_id: str, user_id: str) -> Scope:
    """User memories are per (agent, user); official ones are shared by the agent's users
    (the rule itself lives in the store's Scope)."""
    return Scope.of(agent_id=agent_id, user_id=user_id if db == "user" else None, db=db)


def scope_filters(db: Database, agent_id: str, user_id: str) -> list[dict[str, Any]]:
    return query_scope(db, agent_id, user_id).filters()


def routing(db: Database, params: QueryParams) -> str:
    """The shard(s) of the query's scope in ``db``'s indices."""
    return query_scope(db, params.agent_id, params.user_id).routing


def request_filters(db: Database, params: QueryParams) -> list[dict[str, Any]]:
    """The scope plus the caller's filters: every candidate, ANN ones included, obeys both."""
    return [
        *scope_filters(db, params.agent_id, params.user_id),
        *compile_filters(params.filters),
        *recall_filters(params),  # superseded facts: only for a question about the past
    ]


def exclusion(db: Database, params: QueryParams) -> list[dict[str, Any]]:
    """The user's events the prompt already shows (docs/SPEC.md §2: the overview timeline), by
    the ids returned in each hit's ``index``. Only in the user's database: an id is unique
    within its index, so the agent's official event with the same id is another memory."""
    return [{"terms": {"id": params.exclude_ids}}] if params.exclude_ids and db == "user" else []


def keyword_filter(clauses: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Matches what at least one of the keyword clauses matches (none: no filter)."""
    if not clauses:
        return []
    return [{"bool": {"should": list(clauses), "minimum_should_match": 1}}]
