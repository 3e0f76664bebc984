"""One ``Engine`` over Elasticsearch 8.x and OpenSearch 2.x/3.x.

Every call is one HTTP request through ``Engine.request``: it sets the request's time limit
(what is left of the call's deadline, for reads), calls the request hook (profiling, tests),
and translates either client's errors into a KememError, once. What differs between the
engines is a pure ``Dialect`` (engine/dialect.py); what differs between the two client
libraries is how they send, a ``Send`` function made by engine/connect.py.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kemem_es.config import Settings
from kemem_es.engine.dialect import Dialect
from kemem_es.engine.errors import (
    CLIENT_ERRORS,
    check_bulk,
    check_shards,
    deadline,
    deleted_count,
    found,
    status_of,
    time_left,
    translate_client_error,
)
from kemem_es.errors import ConcurrentChange, KememError, current_activity

__all__ = [
    "Engine", "Request", "RequestHook", "Search", "Send", "connect", "deadline", "hit_ref",
]  # fmt: skip

Search = (
    tuple[str, dict[str, Any]]
    | tuple[str, dict[str, Any], str | None]
    | tuple[str, dict[str, Any], str | None, bool]
)


@dataclass
class Request:
    """One request as ``Engine.request`` sends it (what a request hook sees)."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    ndjson: bool = False  # ``body`` is a list of lines (bulk, msearch)
    timeout: float | None = None  # None: the client's default (``es_timeout_s``)
    doing: str = "search engine"  # what a translated error says we were doing


DELETE_PAGE = 1000  # ids per round of a delete-by-query without the reindex module
DELETE_ROUNDS = 5  # delete-by-query rounds while the engine reports documents changed meanwhile

# How one client library sends a request: the parsed answer (a HEAD: whether it found).
Send = Callable[[Request], Any]


# Called after each request with the request, its answer (None when it raised) and the seconds
# it took; for profiling (bench/profile_query.py) and tests.
RequestHook = Callable[[Request, Any, float], None]


class Engine:
    """A connected cluster: the official client (``client``, for raw access in tests and
    benchmarks), its ``dialect`` and the cluster's root ``info``."""

    def __init__(
        self,
        client: Any,
        settings: Settings,
        info: dict[str, Any],
        dialect: Dialect,
        send: Send | None = None,
    ) -> None:
        self.client = client
        self.settings = settings
        self.info = info
        self.dialect = dialect
        self._send = send
        self.hook: RequestHook | None = None
        self._painless: bool | None = None
        self._no_reindex = False
        if getattr(settings, "scoring", "auto") != "auto":  # else connect() asks the cluster
            self.dialect.scoring = str(settings.scoring)

    @property
    def version(self) -> str:
        return str(self.info.get("version", {}).get("number", "?"))

    @property
    def url(self) -> str:
        return self.settings.url

    @property
    def read_timeout(self) -> float:
        """Reads answer the chat path: what is left of the call's deadline (see ``deadline``),
        else ``query_timeout_s`` — never the long write timeout."""
        return time_left(self.settings.query_timeout_s)

    # -- the one request method ------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        ndjson: bool = False,
        read: bool = False,
        timeout: float | None = None,
        missing_ok: bool = False,
        doing: str | None = None,
    ) -> Any:
        """Send one request. ``read``: bounded by what is left of the call's deadline (else
        ``timeout``, else the client's default). ``missing_ok``: a 404 answers None. Client
        errors leave as KememErrors, labelled ``doing`` (else the caller's ``activity``)."""
        if self._send is None:
            raise RuntimeError("this Engine has no client (built for query planning only)")
        if read:
            timeout = self.read_timeout
        req = Request(
            method, path, _params(params), body, ndjson, timeout, doing or current_activity()
        )
        start = time.perf_counter()
        answer = None
        try:
            answer = self._send(req)
            return answer
        except CLIENT_ERRORS as exc:
            if missing_ok and status_of(exc) == 404:
                return None
            raise translate_client_error(exc, req.doing) from exc
        finally:
            if self.hook is not None:
                self.hook(req, answer, time.perf_counter() - start)

    # -- searches ----------------------------------------------------------------------------
    def search(
        self,
        index: str,
        body: dict[str, Any],
        ignore_unavailable: bool = False,
        routing: str | None = None,
    ) -> dict[str, Any]:
        """``ignore_unavailable``: a missing index among ``index`` is skipped, not an error.
        ``routing`` (``Scope.routing``, comma-separated for several): only the shards that
        hold those scopes are searched."""
        params = _search_params(ignore_unavailable, routing)
        path = f"{_path(index)}/_search"
        return dict(self.request("POST", path, params=params, body=body, read=True))

    def msearch(self, searches: Sequence[Search]) -> list[dict[str, Any]]:
        """Several (index, body[, routing[, ignore_unavailable]]) searches in one round trip;
        responses in order (an error is a response with ``error``, not an exception)."""
        lines: list[dict[str, Any]] = []
        for search in searches:
            index, body = search[0], search[1]
            routing = search[2] if len(search) > 2 else None
            ignore = len(search) > 3 and bool(search[3])
            lines += [{"index": index, **_search_params(ignore, routing)}, body]
        resp = self.request("POST", "/_msearch", body=lines, ndjson=True, read=True)
        return list(resp["responses"])

    def count(
        self, index: str, query: dict[str, Any] | None = None, routing: str | None = None
    ) -> int:
        body = {"query": query} if query else None
        params = {"routing": routing} if routing else None
        resp = self.request("POST", f"{_path(index)}/_count", params=params, body=body, read=True)
        # A count some shards failed would be short (a "would delete N" that deletes more).
        return int(check_shards(dict(resp), "counting")["count"])

    # -- documents ---------------------------------------------------------------------------
    def get(
        self, index: str, doc_id: str, excludes: Sequence[str] = (), routing: str | None = None
    ) -> dict[str, Any] | None:
        """The document (real-time: no refresh needed), or None when it does not exist."""
        params: dict[str, Any] = {"_source_excludes": list(excludes)} if excludes else {}
        if routing:
            params["routing"] = routing
        path = f"{_path(index)}/_doc/{_path(doc_id)[1:]}"
        got = self.request("GET", path, params=params, missing_ok=True)
        return None if got is None else dict(got)

    def _mget(self, refs: Sequence[tuple[str, str, str | None]], params: dict[str, Any]) -> Any:
        body = {"docs": [_doc_ref(index, doc_id, routing) for index, doc_id, routing in refs]}
        return self.request("POST", "/_mget", params=params, body=body, read=True)["docs"]

    def mget(
        self, index: str, docs: Sequence[tuple[str, str | None]], fields: list[str]
    ) -> dict[str, dict[str, Any]]:
        """Found documents' selected source fields, keyed by id; ``docs`` are (id, routing)."""
        got = self._mget([(index, i, r) for i, r in docs], {"_source_includes": fields})
        return {d["_id"]: d.get("_source", {}) for d in got if found(d)}

    def mget_versions(
        self, index: str, docs: Sequence[tuple[str, str | None]], fields: list[str]
    ) -> dict[str, tuple[dict[str, Any], int, int]]:
        """``mget`` with each found document's seq_no and primary term: a write made with them
        (``if_seq_no`` / ``if_primary_term``) fails with 409 if the document changed since."""
        got = self._mget([(index, i, r) for i, r in docs], {"_source_includes": fields})
        return {
            d["_id"]: (d.get("_source", {}), d["_seq_no"], d["_primary_term"])
            for d in got
            if found(d)
        }

    def get_many(
        self,
        refs: Sequence[tuple[str, str, str | None]],
        excludes: Sequence[str] = (),
        realtime: bool = True,
    ) -> list[dict[str, Any] | None]:
        """Several (index, id, routing) documents in one round trip, in order; None where
        missing (no 404s: a miss is an answer here, not an error). Real-time unless
        ``realtime`` is False: then as of the last refresh (no refresh forced for documents
        changed since, which a real-time read of them costs the engine)."""
        params: dict[str, Any] = {"_source_excludes": list(excludes)} if excludes else {}
        if not realtime:
            params["realtime"] = "false"
        got = self._mget(refs, params)
        return [d if found(d) else None for d in got]

    def bulk(
        self,
        lines: list[dict[str, Any]],
        refresh: bool | str = False,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """``timeout_s``: this call's limit, instead of the client's write timeout."""
        params = {"refresh": refresh} if refresh else None
        return dict(
            self.request(
                "POST", "/_bulk", params=params, body=lines, ndjson=True, timeout=timeout_s
            )
        )

    def delete_by_query(self, index: str, body: dict[str, Any]) -> int:
        """Delete what ``body["query"]`` matches (waits, refreshes); returns how many. On a
        cluster without the reindex module (the Elasticsearch node from Maven Central), the
        same by search + bulk delete."""
        if self._no_reindex:
            return self._search_and_delete(index, body)
        params = {"refresh": True, "conflicts": "proceed"}
        path = f"{_path(index)}/_delete_by_query"
        deleted = 0
        # "conflicts": "proceed" skips a document changed while the engine deletes (a session
        # state given its window vector, a memory's strength reinforced): such a document
        # still matches, so the query runs again until no conflict is reported
        for _ in range(DELETE_ROUNDS):
            try:
                resp = self.request("POST", path, params=params, body={"query": body["query"]})
            except KememError as exc:
                text = str(exc).lower()
                if "handler" not in text and "405" not in text:
                    raise
                self._no_reindex = True
                return deleted + self._search_and_delete(index, body)
            deleted += deleted_count(dict(resp))
            if not int(resp.get("version_conflicts", 0) or 0):
                return deleted
        raise ConcurrentChange(
            f"deleting by query in {index}: documents kept changing while being deleted "
            f"({deleted} deleted); deleting again removes the rest"
        )

    def _search_and_delete(self, index: str, body: dict[str, Any]) -> int:
        """Delete-by-query without the reindex module: a page of matching ids, deleted in one
        refreshed bulk, until none match. What was already gone is no error."""
        deleted = 0
        for _ in range(100_000):  # bounded: every round deletes at least one document
            page = {"query": body["query"], "size": DELETE_PAGE, "_source": False}
            page["track_total_hits"] = False
            hits = self.request("POST", f"{_path(index)}/_search", body=page)["hits"]["hits"]
            if not hits:
                break
            lines = [{"delete": hit_ref(h)} for h in hits]
            res = self.bulk(lines, refresh=True)
            check_bulk(res, "deleting by query")
            gone = sum(1 for i in res.get("items", []) if i["delete"].get("result") == "deleted")
            deleted += gone
            if not gone:
                break
        return deleted

    # -- scripts or none ---------------------------------------------------------------------
    @property
    def painless(self) -> bool:
        """Whether the cluster runs Painless (the Elasticsearch node from Maven Central does
        not, nor may a managed service that restricts scripts); asked once. A cluster that
        does not say (no permission) counts as a full distribution."""
        if self._painless is None:
            self._painless = True
            if self.dialect.name == "elasticsearch":
                try:
                    langs = self.request("GET", "/_script_language", timeout=10)
                except Exception:
                    langs = None
                contexts = langs.get("language_contexts") if isinstance(langs, dict) else None
                if isinstance(contexts, list):
                    self._painless = any(
                        isinstance(c, dict) and c.get("language") == "painless" for c in contexts
                    )
        return self._painless

    def resolve_scoring(self) -> str:
        """KEMEM_SCORING for this cluster (auto: native without Painless, else script), set on
        the dialect the query builders read."""
        wanted = getattr(self.settings, "scoring", "auto")
        if wanted == "auto":
            wanted = "script" if self._send is None or self.painless else "native"
        self.dialect.scoring = str(wanted)
        return self.dialect.scoring

    # -- points in time: one unchanging view of the indices for a listing's pages ------------
    def open_pit(self, index: str, keep_alive: str, routing: str | None = None) -> str:
        """A point in time over ``index`` (its id): searches of it see the documents as they
        are now, whatever is written later, until ``keep_alive`` passes unused."""
        params = {"keep_alive": keep_alive, **({"routing": routing} if routing else {})}
        path = _path(index) + self.dialect.pit_open_path
        # a listing's call, bounded like its searches
        return self.dialect.pit_id(self.request("POST", path, params=params, read=True))

    def search_pit(self, pit_id: str, keep_alive: str, body: dict[str, Any]) -> dict[str, Any]:
        """A search of a point in time, keeping it alive ``keep_alive`` longer (the answer's
        ``pit_id`` is the one to use next)."""
        body = {**body, "pit": {"id": pit_id, "keep_alive": keep_alive}}
        return dict(self.request("POST", "/_search", body=body, read=True))

    def close_pit(self, pit_id: str) -> None:
        body = self.dialect.pit_close_body(pit_id)
        self.request("DELETE", self.dialect.pit_close_path, body=body, read=True)

    # -- indices and the cluster -------------------------------------------------------------
    def health(self, timeout_s: float | None = None) -> dict[str, Any]:
        """``timeout_s``: this call's limit, instead of the client's admin timeout."""
        return dict(self.request("GET", "/_cluster/health", timeout=timeout_s))

    def index_exists(self, index: str) -> bool:
        return bool(self.request("HEAD", _path(index)))

    def get_index(self, index: str) -> dict[str, Any]:
        """Settings + mappings keyed by concrete index name (index may be an alias)."""
        return dict(self.request("GET", _path(index)))

    def create_index(self, index: str, body: dict[str, Any]) -> None:
        self.request("PUT", _path(index), body=self.dialect.index_body(body))

    def delete_index(self, index: str) -> None:
        self.request("DELETE", _path(index), params={"ignore_unavailable": True})

    def put_index_template(self, name: str, body: dict[str, Any]) -> None:
        self.request("PUT", f"/_index_template{_path(name)}", body=self.dialect.template_body(body))

    def put_mapping(self, index: str, properties: dict[str, Any]) -> None:
        """Fields added to an existing index's mapping (existing fields cannot change)."""
        self.request("PUT", f"{_path(index)}/_mapping", body={"properties": properties})

    def get_settings(self, index: str, name: str) -> dict[str, Any]:
        return dict(self.request("GET", f"{_path(index)}/_settings{_path(name)}"))

    def put_settings(self, index: str, body: dict[str, Any]) -> None:
        self.request("PUT", f"{_path(index)}/_settings", body=body)

    def update_aliases(self, actions: list[dict[str, Any]]) -> None:
        """Alias changes applied atomically."""
        self.request("POST", "/_aliases", body={"actions": actions})

    def refresh(self, index: str, timeout_s: float | None = None) -> None:
        """``timeout_s``: this call's limit, instead of the client's write timeout (a refresh
        before an interactive read is bounded like the read, ``read_timeout``)."""
        self.request("POST", f"{_path(index)}/_refresh", timeout=timeout_s)


def hit_ref(hit: dict[str, Any], versioned: bool = False) -> dict[str, Any]:
    """A search hit's document as a bulk action names it: index, id, routing; ``versioned``:
    only as the version read (the hit must carry ``_seq_no`` and ``_primary_term``)."""
    ref = {"_index": hit["_index"], "_id": hit["_id"]}
    if hit.get("_routing") is not None:
        ref["routing"] = hit["_routing"]
    if versioned:
        ref |= {"if_seq_no": hit["_seq_no"], "if_primary_term": hit["_primary_term"]}
    return ref


def _path(name: str) -> str:
    """``/name``, quoted as both clients quote a path part (commas and wildcards kept)."""
    return "/" + urllib.parse.quote(name, ",*")


def _params(params: dict[str, Any] | None) -> dict[str, str]:
    """Query parameters as both clients write them: booleans lowercase, lists comma-joined."""
    out: dict[str, str] = {}
    for key, value in (params or {}).items():
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, list | tuple):
            out[key] = ",".join(str(v) for v in value)
        else:
            out[key] = str(value)
    return out


def _doc_ref(index: str, doc_id: str, routing: str | None) -> dict[str, Any]:
    ref = {"_index": index, "_id": doc_id}
    return ref | {"routing": routing} if routing else ref


def _search_params(ignore_unavailable: bool, routing: str | None) -> dict[str, Any]:
    kw: dict[str, Any] = {"ignore_unavailable": True} if ignore_unavailable else {}
    return kw | {"routing": routing} if routing else kw


def connect(settings: Settings | None = None, bridge: Any = None) -> Engine:
    """Connect to the configured cluster (see engine/connect.py)."""
    from kemem_es.engine.connect import connect as _connect

    return _connect(settings, bridge)
