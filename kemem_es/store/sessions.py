"""Conversation sessions in the engine: messages, one state document per session, and the
recent extracted events of a user (the overview timeline's source).

Everything lives in one index ``{prefix}-sessions`` (template ``sessions.json``), routed and
filtered by the one scope rule (:class:`Scope`): a message's engine id is derived from its scope,
session and in-session sequence number, so a message sent again under the same number is stored
once, and another scope's session is simply not found. The batches handed to extraction (the
durable pending-extraction records) live in the same index: see ``store/batches.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kemem_es.contract.memory import Action
from kemem_es.engine.client import Engine
from kemem_es.engine.errors import check_bulk, check_shards
from kemem_es.errors import ConcurrentChange, activity
from kemem_es.store import history
from kemem_es.store.documents import utc_now
from kemem_es.store.layout import HEAVY_FIELDS, index_alias
from kemem_es.store.scope import Scope, checked_id
from kemem_es.store.templates import _create, _load, put_template, template_version

log = logging.getLogger(__name__)

SESSIONS = "sessions"
_SEP = "\x1f"
LIST_MAX = 10_000  # messages one listing returns at most (the engine's default window)
# Fields added to the sessions template after its version 1 shipped: an index without them is
# given them in place at install (a state document written before simply lacks them).
# The prepared window vector (search.shared_window) lives on the state: a newer add replaces
# the state and so drops it; deleting the session deletes it.
WINDOW_FIELD = "window_vector"
# ``incarnation``: a token the state gets when the session is created, stamped on its messages
# (a process keeps the turns it holds per incarnation: session/held.py).
ADDED = {
    "window_open": {"type": "boolean"},
    WINDOW_FIELD: {"type": "object", "enabled": False},
    "incarnation": {"type": "keyword", "index": False},
}


def sessions_alias(prefix: str) -> str:
    return f"{prefix}-{SESSIONS}"


def checked_session(session_id: object) -> str:
    """A session id by the ids' own rule (a string, stripped, not empty, ≤ 200 bytes)."""
    return checked_id(session_id, "session_id")


def message_key(session_id: str, seq: int) -> str:
    return f"msg{_SEP}{session_id}{_SEP}{seq}"


def state_key(session_id: str) -> str:
    return f"state{_SEP}{session_id}"


def batch_key(session_id: str, first_seq: int) -> str:
    return f"batch{_SEP}{session_id}{_SEP}{first_seq}"


@dataclass(frozen=True)
class Versioned:
    """A document as read, with its concurrency token (a write with it fails if it changed)."""

    source: dict[str, Any]
    seq_no: int
    primary_term: int


@dataclass(frozen=True)
class Written:
    """What ``SessionStore.write`` did: per message ``created`` or ``exists``, and the state
    document as written (its source and new concurrency token)."""

    statuses: list[str]
    state: Versioned
    messages: list[dict[str, Any]]  # the message documents as sent, in order


class SessionStore:
    """Reads and writes of the sessions index; every call takes a :class:`Scope`."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.alias = sessions_alias(engine.settings.index_prefix)
        self._installed = False

    # -- install --------------------------------------------------------------------------
    def install(self) -> None:
        """The index and its template (idempotent; once per instance)."""
        if self._installed:
            return
        base = _load(f"{SESSIONS}.json")
        body = {
            "settings": {**base["settings"], "number_of_replicas": self.engine.settings.replicas},
            "mappings": {
                **base["mappings"],
                "_routing": {"required": True},
                "_meta": {
                    "kemem_template_version": base["template_version"],
                    "kemem_kind": SESSIONS,
                },
            },
        }
        with activity("installing the sessions index"):
            put_template(self.engine, self.alias, body)
            if not self.engine.index_exists(self.alias):
                index = f"{self.alias}-v{template_version(SESSIONS)}"
                _create(
                    self.engine, index, {**body, "aliases": {self.alias: {"is_write_index": True}}}
                )
            else:
                self.engine.put_mapping(self.alias, ADDED)
        self._installed = True

    def exists(self) -> bool:
        """The sessions index is there (then installed, with its added fields): a sweep over a
        prefix that never stored a session creates nothing."""
        if not self._installed:
            with activity("reading sessions"):
                if not self.engine.index_exists(self.alias):
                    return False
            self.install()
        return True

    def _ref(self, scope: Scope, key: str) -> tuple[str, str, str]:
        return self.alias, scope.doc_id(key), scope.routing

    def _base(self, scope: Scope, session_id: str, doc_type: str, key: str) -> dict[str, Any]:
        return {
            "doc_type": doc_type,
            "uid": scope.doc_id(key),
            **scope.fields(),
            "session_id": session_id,
        }

    # -- real-time reads by id ----------------------------------------------------------------
    def get_docs(self, scope: Scope, keys: Sequence[str]) -> list[Versioned | None]:
        """Documents by key, real time (no refresh needed), checked against the scope."""
        if not keys:
            return []
        self.install()
        refs = [self._ref(scope, k) for k in keys]
        with activity("reading a session"):
            docs = self.engine.get_many(refs)
        out: list[Versioned | None] = []
        for doc in docs:
            if doc is None or not scope.owns(doc.get("_source", {})):
                out.append(None)
            else:
                out.append(Versioned(doc["_source"], doc["_seq_no"], doc["_primary_term"]))
        return out

    def state(self, scope: Scope, session_id: str) -> Versioned | None:
        (found,) = self.get_docs(scope, [state_key(session_id)])
        return found

    def messages_by_seq(
        self, scope: Scope, session_id: str, first: int, last: int
    ) -> list[dict[str, Any]]:
        """Messages ``first``..``last`` (inclusive), in order, real time; missing ones skipped."""
        if last < first:
            return []
        keys = [message_key(session_id, s) for s in range(first, last + 1)]
        return [d.source for d in self.get_docs(scope, keys) if d is not None]

    # -- writes -----------------------------------------------------------------------------
    def _state_line(
        self, scope: Scope, session_id: str, fields: Mapping[str, Any], version: Versioned | None
    ) -> list[dict[str, Any]]:
        key = state_key(session_id)
        doc = {**self._base(scope, session_id, "state", key), **fields}
        meta: dict[str, Any] = {
            "_index": self.alias,
            "_id": scope.doc_id(key),
            "routing": scope.routing,
        }
        if version is None:
            return [{"create": meta}, doc]
        meta |= {"if_seq_no": version.seq_no, "if_primary_term": version.primary_term}
        return [{"index": meta}, doc]

    def _message_lines(
        self,
        scope: Scope,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        incarnation: str | None = None,
    ) -> list[dict[str, Any]]:
        lines: list[dict[str, Any]] = []
        stamp = {"incarnation": incarnation} if incarnation else {}
        for m in messages:
            key = message_key(session_id, int(m["seq"]))
            meta = {"_index": self.alias, "_id": scope.doc_id(key), "routing": scope.routing}
            doc = (
                self._base(scope, session_id, "message", key)
                | {
                    "seq": int(m["seq"]),
                    "role": m["role"],
                    "name": m.get("name"),
                    "content": m["content"],
                    "at": m.get("at") or utc_now(),
                }
                | stamp
            )
            lines += [{"create": meta}, doc]
        return lines

    def put_state(
        self, scope: Scope, session_id: str, fields: Mapping[str, Any], version: Versioned | None
    ) -> Versioned:
        """Write the session's state over ``version`` (None: it must not exist yet);
        ConcurrentChange when another writer changed it meanwhile. Returns it as written."""
        return self.write(scope, session_id, [], [], fields, version).state

    def put_window(
        self, scope: Scope, session_id: str, rec: Mapping[str, Any], version: Versioned
    ) -> bool:
        """The session's prepared window vector onto its state as read at ``version``;
        False when the state changed or went since (a newer add, the session deleted): the
        vector was for a window that is no more."""
        self.install()
        meta = {
            "_index": self.alias,
            "_id": scope.doc_id(state_key(session_id)),
            "routing": scope.routing,
            "if_seq_no": version.seq_no,
            "if_primary_term": version.primary_term,
        }
        with activity("writing a session"):
            resp = self.engine.bulk([{"update": meta}, {"doc": {WINDOW_FIELD: dict(rec)}}])
        status = int(resp["items"][0]["update"].get("status", 0))
        if status in (404, 409):
            return False
        check_bulk(resp, "writing a session")
        return True

    def write(
        self,
        scope: Scope,
        session_id: str,
        messages: Sequence[Mapping[str, Any]],
        extra: Sequence[dict[str, Any]],
        state: Mapping[str, Any],
        version: Versioned | None,
    ) -> Written:
        """One round trip: the messages (``create``: a (session, seq) stored already is left as
        it is; stamped with the state's ``incarnation``), ``extra`` bulk lines (batch records),
        then the state over ``version``. Returns per message ``"created"`` or ``"exists"`` and
        the state as written (its new concurrency token); ConcurrentChange when the state
        changed meanwhile (the messages and batches are stored: writing them again is a no-op)."""
        self.install()
        incarnation = state.get("incarnation")
        lines = self._message_lines(scope, session_id, messages, incarnation) + list(extra)
        lines += self._state_line(scope, session_id, state, version)
        with activity("writing a session"):
            resp = self.engine.bulk(lines)
        items = [next(iter(i.values())) for i in resp["items"]]
        if items[-1].get("status") == 409:
            self._drop_orphans(scope, items[len(messages) : -1])
            raise ConcurrentChange(f"session {session_id!r} changed meanwhile")
        check_bulk(
            {"items": [i for i in resp["items"] if next(iter(i.values())).get("status") != 409]},
            "writing a session",
        )
        statuses = [
            "exists" if i.get("status") == 409 else "created" for i in items[: len(messages)]
        ]
        last = items[-1]
        written = Versioned(dict(lines[-1]), int(last["_seq_no"]), int(last["_primary_term"]))
        docs = lines[1 : 2 * len(messages) : 2]
        return Written(statuses, written, docs)

    def _drop_orphans(self, scope: Scope, items: Sequence[Mapping[str, Any]]) -> None:
        """Batch records this write created although its state write lost (another writer
        moved the window meanwhile): no state lists them, so they go again at once (the retry
        records its own; a worker never extracts a batch its session's state does not list)."""
        created = [i["_id"] for i in items if i.get("status") in (200, 201)]
        if created:
            with activity("writing a session"):
                self.engine.bulk(
                    [
                        {"delete": {"_index": self.alias, "_id": i, "routing": scope.routing}}
                        for i in created
                    ]
                )

    def put_messages(
        self, scope: Scope, session_id: str, messages: Sequence[Mapping[str, Any]]
    ) -> list[str]:
        """Store messages without touching the state (see ``write``)."""
        if not messages:
            return []
        self.install()
        with activity("storing session messages"):
            resp = self.engine.bulk(self._message_lines(scope, session_id, messages))
        check_bulk(
            {"items": [i for i in resp["items"] if i["create"].get("status") != 409]},
            "storing session messages",
        )
        return ["exists" if i["create"].get("status") == 409 else "created" for i in resp["items"]]

    # -- listings (after a refresh: what this process wrote counts) --------------------------
    def _search(self, scope: Scope, body: dict[str, Any], doing: str) -> dict[str, Any]:
        self.install()
        with activity(doing):
            self.engine.refresh(self.alias, self.engine.read_timeout)
            resp = self.engine.search(self.alias, body, routing=scope.routing)
        return check_shards(resp, doing)

    def list_messages(
        self, scope: Scope, session_id: str, limit: int = 1000, after_seq: int = -1
    ) -> list[dict[str, Any]]:
        """A session's messages in order (``after_seq``: those after it)."""
        body = {
            "size": min(limit, LIST_MAX),
            "query": {
                "bool": {
                    "filter": [
                        *scope.filters(),
                        {"term": {"doc_type": "message"}},
                        {"term": {"session_id": session_id}},
                        {"range": {"seq": {"gt": after_seq}}},
                    ]
                }
            },
            "sort": [{"seq": "asc"}],
        }
        hits = self._search(scope, body, "listing session messages")["hits"]["hits"]
        return [h["_source"] for h in hits if scope.owns(h["_source"])]

    def list_sessions(self, scope: Scope, limit: int = 100) -> list[dict[str, Any]]:
        """The scope's sessions (their state documents), most recently active first."""
        body = {
            "size": limit,
            "query": {"bool": {"filter": [*scope.filters(), {"term": {"doc_type": "state"}}]}},
            "sort": [{"last_at": {"order": "desc", "missing": "_last"}}],
            "_source": {"excludes": ["last_context", WINDOW_FIELD]},
        }
        hits = self._search(scope, body, "listing sessions")["hits"]["hits"]
        return [h["_source"] for h in hits if scope.owns(h["_source"])]

    def idle_states(
        self, before: str, limit: int, after: list[Any] | None = None
    ) -> list[tuple[Scope, dict[str, Any], list[Any]]]:
        """Sessions of every scope whose window still holds turns and whose last message came
        before ``before`` (ISO time), oldest first: (scope, state, sort key for ``after``).
        A state written before ``window_open`` existed is listed until it is written again."""
        if not self.exists():
            return []
        body: dict[str, Any] = {
            "size": limit,
            "query": {
                "bool": {
                    "filter": [
                        {"term": {"doc_type": "state"}},
                        {"range": {"last_at": {"lt": before}}},
                        {
                            "bool": {
                                "should": [
                                    {"term": {"window_open": True}},
                                    {"bool": {"must_not": {"exists": {"field": "window_open"}}}},
                                ],
                                "minimum_should_match": 1,
                            }
                        },
                    ]
                }
            },
            "sort": [{"last_at": "asc"}, {"uid": "asc"}],
            "_source": {"excludes": ["last_context", "summary", WINDOW_FIELD]},
        }
        if after:
            body["search_after"] = after
        with activity("listing idle sessions"):
            self.engine.refresh(self.alias, self.engine.read_timeout)
            resp = self.engine.search(self.alias, body)
        out = []
        for hit in check_shards(resp, "listing idle sessions")["hits"]["hits"]:
            src = hit["_source"]
            scope = Scope.of(agent_id=src["agent_id"], user_id=src.get("user_id"), db=src["db"])
            out.append((scope, src, hit["sort"]))
        return out

    def recent_events(self, scope: Scope, prefix: str, limit: int) -> list[dict[str, Any]]:
        """The scope's newest ``limit`` events extracted from a session (they carry its
        session_id), newest first by when they were written: the overview timeline's source."""
        alias = index_alias(prefix, scope.db, "events")
        body = {
            "size": limit,
            "query": {"bool": {"filter": [*scope.filters(), {"exists": {"field": "session_id"}}]}},
            "sort": [{"indexed_at": {"order": "desc", "missing": "_last"}}, {"uid": "asc"}],
            "_source": {"excludes": HEAVY_FIELDS},
        }
        with activity("reading the overview"):
            resp = self.engine.search(alias, body, ignore_unavailable=True, routing=scope.routing)
        return [h["_source"] for h in check_shards(resp, "reading the overview")["hits"]["hits"]]

    # -- deletes (recorded in history, one entry per session) --------------------------------
    def delete(
        self, scope: Scope, session_id: str | None, forget: bool = False, actor: str = "api"
    ) -> int:
        """Delete one session (or, with ``session_id=None``, every session of the scope):
        messages, state and batches. One history entry per session (kind ``sessions``): a
        DELETE with the message count, or with ``forget`` a FORGET that keeps no text.
        Returns how many messages were deleted."""
        with activity("deleting sessions"):
            if not self._installed and not self.engine.index_exists(self.alias):
                return 0  # no session was ever stored under this prefix
        filters = [*scope.filters()]
        if session_id is not None:
            filters.append({"term": {"session_id": session_id}})
        counts = self._message_counts(scope, filters)
        with activity("deleting sessions"):
            self.engine.delete_by_query(self.alias, {"query": {"bool": {"filter": filters}}})
        event: Action = "FORGET" if forget else "DELETE"
        entries = []
        for sid, n in counts.items():
            reason = f"session deleted ({n} messages)"
            doc = history.entry(scope, f"session:{sid}", "events", event, actor, reason=reason)
            entries.append(doc | {"kind": SESSIONS})  # a session's entry, not a memory's
        if entries:
            with activity("recording history"):
                check_bulk(history.write(self.engine, entries), "recording history")
        return sum(counts.values())

    def _message_counts(self, scope: Scope, filters: list[dict[str, Any]]) -> dict[str, int]:
        body = {
            "size": 0,
            "query": {"bool": {"filter": filters}},
            "aggs": {
                "s": {
                    "terms": {"field": "session_id", "size": 10_000},
                    "aggs": {"m": {"filter": {"term": {"doc_type": "message"}}}},
                }
            },
        }
        buckets = self._search(scope, body, "counting session messages")["aggregations"]["s"]
        return {b["key"]: int(b["m"]["doc_count"]) for b in buckets["buckets"]}
