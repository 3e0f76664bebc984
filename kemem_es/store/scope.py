"""The tenancy rule, stated once: who a memory belongs to, and what every request is limited to.

A scope is (db, agent_id, user_id). User memories belong to one (agent, user); official memories
are shared by every user of one agent and carry no user. Every read, write, update and delete
goes through :class:`Scope`: writes derive the engine ``_id`` from it (so equal caller ids in two
scopes can never collide), reads and deletes filter by it, and a fetched document is checked
against it before it is returned.

The scope is also the engine's **routing** key: all memories of one scope live on one shard of
each index, so a scoped request reads one shard however many the index has (the per-user ANN
search then filters a shard's graph, not the whole index's). User memories route by
(agent, user); an agent's official memories by agent.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from kemem_es.bounded import Bounded
from kemem_es.errors import InvalidInput
from kemem_es.models import Database, ScopeId
from kemem_es.store.layout import DATABASES

_DATABASE: dict[str, Database] = {db: db for db in DATABASES}  # a caller's string → the Literal
_SEP = "\x1f"  # unit separator: cannot occur in a validated id, so parts never run together
_ID: TypeAdapter[str] = TypeAdapter(ScopeId)


def checked_id(value: object, field: str) -> str:
    """A caller's id (agent, user or memory) by the records' own rule (``models.ScopeId``): a
    string, stripped, not empty, at most 200 bytes, no control characters. So a separator can
    never make two scopes' keys run together, and a wrong type is an error, not a TypeError.
    A memory id to write also follows ``models.MemoryId`` (no '/', not '.' or '..', checked
    with its record); looking one up keeps this wider rule, so a memory stored before that can
    still be deleted."""
    try:
        return _ID.validate_python(value)
    except ValidationError as exc:
        problem = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise InvalidInput(f"{field}: {problem}", field=field) from None


_SCOPES_MAX = 10_000  # scopes remembered by Scope.of (the least recently used go beyond)
_SCOPES: Bounded[tuple[str | None, str | None, str], Scope] = Bounded(_SCOPES_MAX)


@dataclass(frozen=True)
class Scope:
    db: Database
    agent_id: str
    user_id: str | None = None

    @classmethod
    def of(cls, *, agent_id: str | None, user_id: str | None = None, db: str = "user") -> Scope:
        """The scope rule. Raises InvalidInput naming the field that breaks it. Scopes that
        pass are remembered (a query builds ~15 of the same few: issue 42); errors never."""
        plain = type(agent_id) is str and type(db) is str and type(user_id) in (str, type(None))
        if plain and cls is Scope:
            known = _SCOPES.peek((agent_id, user_id, db))  # not a use: the oldest put goes
            if known is not None:
                return known
        scope = cls._of(agent_id=agent_id, user_id=user_id, db=db)
        if plain and cls is Scope:  # a thread that built it meanwhile: its object
            return _SCOPES.setdefault((agent_id, user_id, db), scope)
        return scope

    @classmethod
    def _of(cls, *, agent_id: str | None, user_id: str | None, db: str) -> Scope:
        database = _DATABASE.get(db) if isinstance(db, str) else None
        if database is None:
            shown = repr(db)[:60] if isinstance(db, str) else f"a {type(db).__name__}"
            raise InvalidInput(f"db: must be 'user' or 'official', not {shown}", field="db")
        for field, value in (("agent_id", agent_id), ("user_id", user_id)):
            if value is not None and not isinstance(value, str):
                raise InvalidInput(f"{field}: must be a string, not a {type(value).__name__}",
                                   field=field)  # fmt: skip
        if not agent_id or not str(agent_id).strip():
            raise InvalidInput("agent_id: every memory belongs to an agent", field="agent_id")
        if db == "user" and not (user_id and str(user_id).strip()):
            raise InvalidInput("user_id: required for the user database", field="user_id")
        if db == "official" and user_id:
            raise InvalidInput(
                "user_id: must be empty for the official database (shared by all users)",
                field="user_id",
            )
        user = checked_id(user_id, "user_id") if user_id else None
        return cls(database, checked_id(agent_id, "agent_id"), user)

    def doc_id(self, memory_id: str) -> str:
        """The engine ``_id``: a hash of the scope and the caller's id (fixed length, opaque)."""
        key = _SEP.join((self.db, self.agent_id, self.user_id or "", memory_id))
        return hashlib.blake2b(key.encode(), digest_size=20).hexdigest()

    @property
    def routing(self) -> str:
        """The engine routing value: opaque (no ids in URLs or logs) and fixed per scope, so a
        document's shard never changes while its ``_id`` (derived from the same scope) lives."""
        key = _SEP.join((self.db, self.agent_id, self.user_id or ""))
        return hashlib.blake2b(key.encode(), digest_size=8).hexdigest()

    def filters(self) -> list[dict[str, Any]]:
        """Query filters that keep a request inside this scope."""
        return scope_filters(self.db, self.agent_id, self.user_id)

    def owns(self, source: dict[str, Any]) -> bool:
        """Whether a stored document belongs to this scope (checked on every fetch)."""
        return (
            source.get("db") == self.db
            and source.get("agent_id") == self.agent_id
            and source.get("user_id") == self.user_id
        )

    def fields(self) -> dict[str, Any]:
        return {"db": self.db, "agent_id": self.agent_id, "user_id": self.user_id}

    def describe(self) -> str:
        who = f"user {self.user_id} of " if self.user_id else ""
        return f"{self.db} memories of {who}agent {self.agent_id}"


def scope_filters(
    db: Database, agent_id: str | None = None, user_id: str | None = None
) -> list[dict[str, Any]]:
    """Query filters for a scope, or for every scope of a database (of one agent, or one
    user) where ``agent_id`` / ``user_id`` is None: the clean-up's walk over all users."""
    out: list[dict[str, Any]] = [{"term": {"db": db}}]
    if agent_id is not None:
        out.append({"term": {"agent_id": agent_id}})
    if user_id is not None:
        out.append({"term": {"user_id": user_id}})
    return out


def any_of(scopes: list[Scope]) -> dict[str, Any]:
    """One filter matching any of several scopes (a user's memories + the agent's official)."""
    return {
        "bool": {
            "should": [{"bool": {"filter": s.filters()}} for s in scopes],
            "minimum_should_match": 1,
        }
    }


def scope_of_source(db: Database, source: dict[str, Any]) -> Scope:
    """The scope a stored document belongs to (its own fields, checked by the rule)."""
    return Scope.of(agent_id=source.get("agent_id"), user_id=source.get("user_id"), db=db)


def query_scopes(agent_id: str, user_id: str) -> tuple[Scope, Scope]:
    """What a chat query reads: this user's memories and the agent's official ones."""
    return Scope.of(agent_id=agent_id, user_id=user_id), Scope.of(agent_id=agent_id, db="official")
