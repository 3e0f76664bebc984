"""One small interface over Elasticsearch 8.x and OpenSearch 2.x/3.x.

Everything above this module speaks plain JSON (templates, queries, bulk lines); only the calls
that differ between the two official clients, and the vector pieces of a query, live here.
"""

from __future__ import annotations

import copy
import html
import json
import math
import re
import time
import urllib.error
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from kemem_es.config import Settings, get_settings
from kemem_es.errors import (
    DeadlineExceeded,
    EngineRefused,
    EngineUnavailable,
    KememError,
    Overloaded,
)

if TYPE_CHECKING:
    from kemem_es.engine.bridge import Bridge

# (monotonic end, seconds given) of the call in progress; see ``deadline``.
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("kemem_deadline", default=None)


def _client_errors() -> tuple[type[Exception], ...]:
    from elastic_transport import TransportError
    from elasticsearch import ApiError
    from opensearchpy.exceptions import OpenSearchException

    return (OpenSearchException, ApiError, TransportError)


def _serialization_errors() -> tuple[type[Exception], ...]:
    from elastic_transport import SerializationError as TransportSerializationError
    from opensearchpy.exceptions import SerializationError

    return (SerializationError, TransportSerializationError)


CLIENT_ERRORS = _client_errors()
# The client could not encode (or decode) a body; its text quotes the whole body.
SERIALIZATION_ERRORS = _serialization_errors()


# What to do about an engine error, by a pattern of its text.
REMEDIES = {
    "index_not_found": "nothing indexed under this prefix yet: run `kemem-es init` / "
    "`kemem-es index`",
    "already[_ ]closed": "OpenSearch 3.5 closed this index's vector file after a scroll over "
    "it (k-NN issues 3191, 3458; see the README): close and reopen the index, or restart the "
    "node, and page with search_after instead of scrolling",
}


def with_remedy(text: str) -> str:
    """``text`` and, for an error with a known way out, what to do."""
    for pattern, remedy in REMEDIES.items():
        if re.search(pattern, text, re.IGNORECASE):
            return f"{text} — {remedy}"
    return text


def error_reason(err: object) -> str:
    """The engine's reason in an error object (a failed search, a document of an mget); its
    root-cause list may be empty."""
    if isinstance(err, dict):
        causes = err.get("root_cause") or [{}]
        return str(causes[0].get("reason") or err.get("reason") or err.get("type") or err)
    return str(err)


def type_and_reason(err: object) -> str:
    """``type: reason`` of an engine error object, without what a reason may quote of the
    request: older engines put the query itself (user text) after "failed to create query:"."""
    if not isinstance(err, dict):
        return " ".join(str(err).split())[:300]
    causes = err.get("root_cause") or [err]
    first = causes[0] if isinstance(causes[0], dict) else err
    kind = str(first.get("type") or err.get("type") or "error")
    reason = " ".join(str(first.get("reason") or err.get("reason") or "").split())
    reason = reason.split("{", 1)[0].rstrip(" :")[:300]
    return f"{kind}: {reason}" if reason else kind


def _inner_error(exc: BaseException) -> BaseException | None:
    """What a serialization error wraps (the TypeError of a number past 64 bits...)."""
    inner = exc.__cause__ or exc.__context__
    wrapped = getattr(exc, "errors", ()) or exc.args
    return inner or next((e for e in wrapped if isinstance(e, BaseException)), None)


def _unencodable(exc: BaseException) -> bool:
    """The client could not encode our request (not: could not read the engine's answer)."""
    if not isinstance(exc, SERIALIZATION_ERRORS):
        return False
    return not isinstance(_inner_error(exc), json.JSONDecodeError | UnicodeDecodeError)


def describe_client_error(exc: BaseException) -> str:
    """One line for a client-library error: the engine's status, error type and reason, or the
    connection failure — never the request (a serialization error's own text is the whole
    body, user text included, and an error's text may quote it)."""
    if isinstance(exc, SERIALIZATION_ERRORS):
        inner = _inner_error(exc)
        cause = " ".join(str(inner).split())[:200] if inner is not None else ""
        what = "the request could not be encoded" if _unencodable(exc) else "unreadable answer"
        return f"{what} ({cause or type(exc).__name__})"
    status = status_of(exc) if isinstance(exc, Exception) else None
    info = getattr(exc, "info", None)
    body = info if isinstance(info, dict) else getattr(exc, "body", None)
    if status is not None and isinstance(body, dict) and "error" in body:
        return with_remedy(f"HTTP {status} {type_and_reason(body['error'])}")
    if status is not None:  # an answer without an error object: its status says enough
        what = one_line(str(getattr(exc, "error", "") or "")) or type(exc).__name__
        return with_remedy(f"HTTP {status} {what}")
    return with_remedy(one_line(str(exc), 300) or type(exc).__name__)


_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


def one_line(text: str, limit: int = 200) -> str:
    """A body as one short line: an HTML page (a gateway's or proxy's error page) by its
    title, else its first line of text; never the whole page."""
    if "<" in text and re.search(r"<(!doctype|html|head|body|title)\b", text, re.IGNORECASE):
        found = _TITLE.search(text)
        if found and found.group(1).strip():
            text = found.group(1)
        else:
            lines = (" ".join(_TAG.sub(" ", ln).split()) for ln in text.splitlines())
            text = next((ln for ln in lines if ln), "")
        text = html.unescape(" ".join(text.split()))
        return f"(an HTML page: {text[:limit]})" if text else "(an HTML page)"
    return " ".join(text.split())[:limit]


def translate_client_error(exc: Exception, doing: str) -> KememError:
    """Either client's exception as a KememError: a refused (HTTP 400) or unencodable request
    is ``EngineRefused`` (the input's fault: retrying changes nothing), a busy engine
    ``Overloaded``, a timeout ``DeadlineExceeded``, anything else ``EngineUnavailable``."""
    why = describe_client_error(exc)
    status = status_of(exc)
    if _unencodable(exc):
        return EngineRefused(f"{doing}: {why}")
    if status == 400:
        return EngineRefused(f"{doing}: the search engine refused the request: {why}")
    if status == 429:
        return Overloaded(f"{doing}: {why}")
    if is_timeout(exc):
        current = _DEADLINE.get()
        within = f"within the query's deadline of {current[1]:g} s" if current else "in time"
        return DeadlineExceeded(f"{doing}: the search engine did not answer {within}")
    return EngineUnavailable(f"{doing}: {why}")


def is_timeout(exc: BaseException) -> bool:
    """Either client's timeout (ConnectionTimeout, and the like): the engine did not answer."""
    return "timeout" in type(exc).__name__.lower()


def raise_engine_error(resp: dict[str, Any], doing: str = "search") -> None:
    """Raise for one failed item of a multi-search: a missing index says run init, the
    engine's 400 is our request refused (EngineRefused), anything else is an outage."""
    err = resp.get("error", {})
    if "index_not_found" in str(err):
        raise EngineUnavailable(
            f"{doing} failed: an index is missing ({error_reason(err)}): run `kemem-es init`"
        )
    if resp.get("status") == 400:  # our request, refused: not an outage (see EngineRefused)
        raise EngineRefused(f"{doing} refused: {type_and_reason(err)}")
    raise EngineUnavailable(with_remedy(f"{doing} failed: {type_and_reason(err)}"))


def shard_failure(resp: dict[str, Any]) -> str | None:
    """What went wrong when some shards of a search failed (it still answers 200 with the
    others' hits), else None."""
    shards = resp.get("_shards") or {}
    failed = shards.get("failed") or 0
    if not failed:
        return None
    failures = shards.get("failures") or [{}]
    first = failures[0] if isinstance(failures[0], dict) else {}
    why = type_and_reason(first.get("reason") or "no reason given")
    return f"{failed} of {shards.get('total', '?')} shards failed ({why})"


def failed_items(resp: dict[str, Any]) -> list[dict[str, Any]]:
    """The items of a bulk answer that failed (a delete of what was already gone did not)."""
    out = []
    for item in resp.get("items") or []:
        res: dict[str, Any] = next(iter(item.values()), {})
        status = res.get("status", 0)
        if status >= 300 and not (status == 404 and res.get("result") == "not_found"):
            out.append(res)
    return out


def is_refusal(status: int) -> bool:
    """A bulk item the engine refused for what it holds (400: a malformed value): the record's
    fault. A block (403: read-only index, disk flood stage), back-pressure (429) or a failing
    node (5xx) is the engine's state, not the input's."""
    return status == 400


def check_bulk(resp: dict[str, Any], doing: str) -> None:
    """Raise EngineUnavailable when items of a bulk that must be whole (history entries,
    deletes) failed: they were silently dropped before."""
    failed = failed_items(resp)
    if failed:
        why = type_and_reason(failed[0].get("error") or f"status {failed[0].get('status')}")
        total = len(resp.get("items") or [])
        raise EngineUnavailable(with_remedy(f"{doing}: {len(failed)} of {total} failed ({why})"))


def check_shards(resp: dict[str, Any], doing: str) -> dict[str, Any]:
    """``resp`` when every shard answered. Where the answer must be whole (a list page, a
    scope delete, a history) fewer results would pass for the truth, so that is an error."""
    failure = shard_failure(resp)
    if failure:
        raise EngineUnavailable(f"{doing}: {failure}")
    return resp


@contextmanager
def engine_errors(doing: str) -> Iterator[None]:
    """Translate either client's exceptions into a KememError, once, at the seam (see
    ``translate_client_error``)."""
    try:
        yield
    except KememError:
        raise
    except CLIENT_ERRORS as exc:
        raise translate_client_error(exc, doing) from exc


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every engine read inside gets at most what is left of ``seconds`` (one budget for a
    whole query, however many requests it makes); past it, ``DeadlineExceeded``."""
    token = _DEADLINE.set((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


class Engine(ABC):
    """A connected cluster of one dialect. Subclasses hold the official client."""

    dialect: str
    _excludes_kw: str
    _includes_kw: str

    def __init__(self, client: Any, settings: Settings, info: dict[str, Any]) -> None:
        self.client = client
        self.settings = settings
        self.info = info

    @property
    def version(self) -> str:
        return str(self.info.get("version", {}).get("number", "?"))

    # -- scripts or none -------------------------------------------------------------------
    # The knn clause's score is knn_scale × (1 + cos) / 2 (see ``vector_clause``).
    knn_scale = 1.0
    # Native (script-free) scoring scores a vector clause exactly over at most this many
    # documents per shard (the engines' bound on k and num_candidates).
    NATIVE_K = 10_000

    @property
    def painless(self) -> bool:
        """Whether the cluster runs Painless (the Elasticsearch node from Maven Central does
        not, nor may a managed service that restricts scripts); asked once."""
        cached = getattr(self, "_painless", None)
        if cached is None:
            cached = self._probe_painless()
            self._painless = cached
        return cached

    def _probe_painless(self) -> bool:
        return True

    @property
    def scoring(self) -> str:
        """``native`` (no script on the query path) or ``script``: KEMEM_SCORING, where
        ``auto`` is native on a cluster without Painless and script elsewhere."""
        wanted = getattr(self.settings, "scoring", "auto")
        if wanted == "auto":
            return "script" if self.painless else "native"
        return str(wanted)

    @abstractmethod
    def vector_clause(
        self, field: str, query_vector: Sequence[float], k: int, filters: list[dict],
        weight: float,
    ) -> dict:  # fmt: skip
        """A script-free query clause worth ``weight * (1 + cos) / 2`` on each of the ``k``
        documents within ``filters`` nearest the vector (every one of them, exactly, when the
        filter matches at most ``k`` documents of a shard: the engine then compares them all
        instead of walking the graph)."""

    @property
    def url(self) -> str:
        return self.settings.url

    @property
    def read_timeout(self) -> float:
        """Reads answer the chat path: what is left of the call's deadline (see ``deadline``),
        else ``query_timeout_s`` — never the long write timeout."""
        current = _DEADLINE.get()
        if current is None:
            return self.settings.query_timeout_s
        end, given = current
        left = end - time.monotonic()
        if left < 0.005:
            raise DeadlineExceeded(f"the query's deadline of {given:g} s passed")
        return left

    # -- dialect pieces of queries ---------------------------------------------------------
    @abstractmethod
    def vector_function(self, field: str, query_vector: Sequence[float], weight: float) -> dict:
        """A function_score function worth ``weight * (1 + cos) / 2`` (so it stays in [0, w])."""

    @abstractmethod
    def ann_query(
        self, field: str, query_vector: Sequence[float], k: int, filters: list[dict]
    ) -> dict:
        """An approximate nearest-neighbour query clause restricted by ``filters``."""

    # -- calls that differ between the clients ---------------------------------------------
    @abstractmethod
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

    def msearch(self, searches: Sequence[Search]) -> list[dict[str, Any]]:
        """Several (index, body[, routing[, ignore_unavailable]]) searches in one round trip;
        responses in order (an error is a response with ``error``, not an exception)."""
        lines: list[dict[str, Any]] = []
        for search in searches:
            index, body = search[0], search[1]
            routing = search[2] if len(search) > 2 else None
            ignore = len(search) > 3 and bool(search[3])
            lines += [{"index": index, **_search_kw(ignore, routing)}, body]
        return list(self._msearch(lines)["responses"])

    @abstractmethod
    def _msearch(self, lines: list[dict[str, Any]]) -> Any: ...

    def mget(
        self, index: str, docs: Sequence[tuple[str, str | None]], fields: list[str]
    ) -> dict[str, dict[str, Any]]:
        """Found documents' selected source fields, keyed by id; ``docs`` are (id, routing)."""
        body = {"docs": [_doc_ref(index, doc_id, routing) for doc_id, routing in docs]}
        resp = self._mget_body(body, {self._includes_kw: fields})
        return {d["_id"]: d.get("_source", {}) for d in resp["docs"] if _found(d)}

    def mget_versions(
        self, index: str, docs: Sequence[tuple[str, str | None]], fields: list[str]
    ) -> dict[str, tuple[dict[str, Any], int, int]]:
        """``mget`` with each found document's seq_no and primary term: a write made with them
        (``if_seq_no`` / ``if_primary_term``) fails with 409 if the document changed since."""
        body = {"docs": [_doc_ref(index, doc_id, routing) for doc_id, routing in docs]}
        resp = self._mget_body(body, {self._includes_kw: fields})
        return {
            d["_id"]: (d.get("_source", {}), d["_seq_no"], d["_primary_term"])
            for d in resp["docs"]
            if _found(d)
        }

    @abstractmethod
    def bulk(
        self,
        lines: list[dict[str, Any]],
        refresh: bool | str = False,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """``timeout_s``: this call's limit, instead of the client's write timeout."""

    @abstractmethod
    def create_index(self, index: str, body: dict[str, Any]) -> None: ...

    @abstractmethod
    def put_index_template(self, name: str, body: dict[str, Any]) -> None: ...

    @abstractmethod
    def put_mapping(self, index: str, properties: dict[str, Any]) -> None:
        """Fields added to an existing index's mapping (existing fields cannot change)."""

    # -- calls that are the same shape on both -----------------------------------------
    def health(self, timeout_s: float | None = None) -> dict[str, Any]:
        """``timeout_s``: this call's limit, instead of the client's admin timeout."""
        return dict(self.client.cluster.health(**_timeout_kw(timeout_s)))

    def index_exists(self, index: str) -> bool:
        return bool(self.client.indices.exists(index=index))

    def get_index(self, index: str) -> dict[str, Any]:
        """Settings + mappings keyed by concrete index name (index may be an alias)."""
        return dict(self.client.indices.get(index=index))

    def delete_index(self, index: str) -> None:
        self.client.indices.delete(index=index, ignore_unavailable=True)

    @abstractmethod
    def update_aliases(self, actions: list[dict[str, Any]]) -> None:
        """Alias changes applied atomically."""

    def refresh(self, index: str, timeout_s: float | None = None) -> None:
        """``timeout_s``: this call's limit, instead of the client's write timeout (a refresh
        before an interactive read is bounded like the read, ``read_timeout``)."""
        self.client.indices.refresh(index=index, **_timeout_kw(timeout_s))

    def count(
        self, index: str, query: dict[str, Any] | None = None, routing: str | None = None
    ) -> int:
        body = {"query": query} if query else None
        # A count some shards failed would be short (a "would delete N" that deletes more).
        return int(check_shards(self._count(index, body, routing), "counting")["count"])

    def _count(
        self, index: str, body: dict[str, Any] | None, routing: str | None
    ) -> dict[str, Any]:
        kw = {"routing": routing} if routing else {}
        return dict(
            self.client.count(index=index, body=body, request_timeout=self.read_timeout, **kw)
        )

    def get(
        self, index: str, doc_id: str, excludes: Sequence[str] = (), routing: str | None = None
    ) -> dict[str, Any] | None:
        """The document (real-time: no refresh needed), or None when it does not exist."""
        try:
            kw: dict[str, Any] = {self._excludes_kw: list(excludes)} if excludes else {}
            if routing:
                kw["routing"] = routing
            return dict(self.client.get(index=index, id=doc_id, **kw))
        except Exception as exc:  # each client raises its own NotFoundError
            if status_of(exc) == 404:
                return None
            raise

    def get_many(
        self, refs: Sequence[tuple[str, str, str | None]], excludes: Sequence[str] = ()
    ) -> list[dict[str, Any] | None]:
        """Several (index, id, routing) documents in one real-time round trip, in order; None
        where missing (no 404s: a miss is an answer here, not an error)."""
        body = {"docs": [_doc_ref(index, doc_id, routing) for index, doc_id, routing in refs]}
        kw = {self._excludes_kw: list(excludes)} if excludes else {}
        resp = self._mget_body(body, kw)
        return [d if _found(d) else None for d in resp["docs"]]

    @abstractmethod
    def _mget_body(self, body: dict[str, Any], kw: dict[str, Any]) -> Any: ...

    @abstractmethod
    def delete_by_query(self, index: str, body: dict[str, Any]) -> int:
        """Delete what ``body["query"]`` matches (waits, refreshes); returns how many."""

    # -- points in time: one unchanging view of the indices for a listing's pages ------------
    @abstractmethod
    def open_pit(self, index: str, keep_alive: str, routing: str | None = None) -> str:
        """A point in time over ``index`` (its id): searches of it see the documents as they
        are now, whatever is written later, until ``keep_alive`` passes unused."""

    @abstractmethod
    def search_pit(self, pit_id: str, keep_alive: str, body: dict[str, Any]) -> dict[str, Any]:
        """A search of a point in time, keeping it alive ``keep_alive`` longer (the answer's
        ``pit_id`` is the one to use next)."""

    @abstractmethod
    def close_pit(self, pit_id: str) -> None: ...


Search = (
    tuple[str, dict[str, Any]]
    | tuple[str, dict[str, Any], str | None]
    | tuple[str, dict[str, Any], str | None, bool]
)


def _timeout_kw(timeout_s: float | None) -> dict[str, Any]:
    """opensearch-py's per-call limit (Elasticsearch's client takes it in ``options``)."""
    return {"request_timeout": timeout_s} if timeout_s is not None else {}


def _deleted(resp: dict[str, Any]) -> int:
    """How many a delete-by-query deleted; its failures (a blocked index, a shard) raise, with
    the count that did go, instead of passing for a smaller match."""
    failures = resp.get("failures") or []
    if failures:
        first = failures[0] if isinstance(failures[0], dict) else {}
        why = type_and_reason(first.get("cause") or first.get("reason") or "no reason given")
        raise EngineUnavailable(
            with_remedy(
                f"deleting by query: {len(failures)} failed ({why}); "
                f"{int(resp.get('deleted', 0))} were deleted"
            )
        )
    return int(resp.get("deleted", 0))


def _found(doc: dict[str, Any]) -> bool:
    """One document of an mget: found, or missing (also when its index is); a document the
    engine failed to read raises, so that a broken index is not taken for a missing memory."""
    if doc.get("found"):
        return True
    error = doc.get("error")
    if not error or "index_not_found" in str(error):
        return False
    where = doc.get("_index", "a document")
    raise EngineUnavailable(with_remedy(f"reading {where}: {error_reason(error)}"))


def _doc_ref(index: str, doc_id: str, routing: str | None) -> dict[str, Any]:
    ref = {"_index": index, "_id": doc_id}
    return ref | {"routing": routing} if routing else ref


def _search_kw(ignore_unavailable: bool, routing: str | None) -> dict[str, Any]:
    kw: dict[str, Any] = {"ignore_unavailable": True} if ignore_unavailable else {}
    return kw | {"routing": routing} if routing else kw


def status_of(exc: Exception) -> int | None:
    """HTTP status carried by either client's exception (opensearch-py: status_code; es: meta)."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    meta = getattr(exc, "meta", None)
    return getattr(meta, "status", None)


class OpenSearchEngine(Engine):
    dialect = "opensearch"
    _excludes_kw = "_source_excludes"
    _includes_kw = "_source_includes"

    def vector_function(self, field: str, query_vector: Sequence[float], weight: float) -> dict:
        # knn_score with cosinesimil scores (1 + cos) / 2 on 2.19 (lucene-style normalisation).
        return {
            "script_score": {
                "script": {
                    "lang": "knn",
                    "source": "knn_score",
                    "params": {
                        "field": field,
                        "query_value": list(query_vector),
                        "space_type": "cosinesimil",
                    },
                }
            },
            "weight": weight,
        }

    def ann_query(
        self, field: str, query_vector: Sequence[float], k: int, filters: list[dict]
    ) -> dict:
        clause: dict[str, Any] = {"vector": list(query_vector), "k": k}
        if filters:
            clause["filter"] = {"bool": {"filter": filters}}
        return {"knn": {field: clause}}

    # The lucene engine's inner-product score is 1 + ip for ip >= 0 (1 / (1 - ip) below), the
    # vectors are unit length: 2 × (1 + cos) / 2 wherever the cosine is not negative.
    knn_scale = 2.0

    def vector_clause(
        self, field: str, query_vector: Sequence[float], k: int, filters: list[dict],
        weight: float,
    ) -> dict:  # fmt: skip
        clause = self.ann_query(field, unit_vector(query_vector), k, filters)
        clause["knn"][field]["boost"] = weight / self.knn_scale
        return clause

    def search(
        self,
        index: str,
        body: dict[str, Any],
        ignore_unavailable: bool = False,
        routing: str | None = None,
    ) -> dict[str, Any]:
        kw = _search_kw(ignore_unavailable, routing)
        return dict(
            self.client.search(index=index, body=body, request_timeout=self.read_timeout, **kw)
        )

    def _msearch(self, lines: list[dict[str, Any]]) -> Any:
        return self.client.msearch(body=lines, request_timeout=self.read_timeout)

    def _mget_body(self, body: dict[str, Any], kw: dict[str, Any]) -> Any:
        return self.client.mget(body=body, request_timeout=self.read_timeout, **kw)

    def bulk(
        self,
        lines: list[dict[str, Any]],
        refresh: bool | str = False,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        kw = {"request_timeout": timeout_s} if timeout_s is not None else {}
        return dict(self.client.bulk(body=lines, refresh=refresh, **kw))

    def create_index(self, index: str, body: dict[str, Any]) -> None:
        self.client.indices.create(index=index, body=self._scored_as_on_2x(body))

    def update_aliases(self, actions: list[dict[str, Any]]) -> None:
        self.client.indices.update_aliases(body={"actions": actions})

    def delete_by_query(self, index: str, body: dict[str, Any]) -> int:
        resp = self.client.delete_by_query(
            index=index, body=body, refresh=True, conflicts="proceed"
        )
        return _deleted(resp)

    def put_mapping(self, index: str, properties: dict[str, Any]) -> None:
        self.client.indices.put_mapping(index=index, body={"properties": properties})

    def open_pit(self, index: str, keep_alive: str, routing: str | None = None) -> str:
        kw = {"routing": routing} if routing else {}
        kw |= _timeout_kw(self.read_timeout)  # a listing's call, bounded like its searches
        return str(self.client.create_pit(index=index, keep_alive=keep_alive, **kw)["pit_id"])

    def search_pit(self, pit_id: str, keep_alive: str, body: dict[str, Any]) -> dict[str, Any]:
        body = {**body, "pit": {"id": pit_id, "keep_alive": keep_alive}}
        return dict(self.client.search(body=body, request_timeout=self.read_timeout))

    def close_pit(self, pit_id: str) -> None:
        self.client.delete_pit(body={"pit_id": [pit_id]}, **_timeout_kw(self.read_timeout))

    def put_index_template(self, name: str, body: dict[str, Any]) -> None:
        if "template" in body:
            body = {**body, "template": self._scored_as_on_2x(body["template"])}
        self.client.indices.put_index_template(name=name, body=body)

    def _scored_as_on_2x(self, body: dict[str, Any]) -> dict[str, Any]:
        """Index settings that give OpenSearch 3.x the keyword scores of 2.x.

        3.0 changed two defaults: text is scored with Lucene's BM25, without the (k1 + 1)
        factor of 2.x's (every BM25 score 2.2 times lower, and kw = bm25 / (bm25 + k) with
        it), and a term query on a keyword field became constant-score. The fusion weights were
        tuned on 2.x, so 3.x indices keep 2.x's formula (``LegacyBM25``) and score keyword
        fields (``use_similarity``); both settings are unknown to 2.x, which needs neither."""
        major = self.version.split(".")[0]
        if not major.isdigit() or int(major) < 3:
            return body
        body = copy.deepcopy(body)
        settings = body.setdefault("settings", {})
        if "index.similarity.default.type" not in settings and "similarity" not in settings.get(
            "index", {}
        ):
            settings["index.similarity.default.type"] = "LegacyBM25"
        stack = [body.get("mappings", {}).get("properties", {})]
        while stack:
            for spec in stack.pop().values():
                if spec.get("type") == "keyword":
                    spec.setdefault("use_similarity", True)
                stack.append(spec.get("properties", {}))
        return body


class ElasticsearchEngine(Engine):
    dialect = "elasticsearch"
    _excludes_kw = "source_excludes"
    _includes_kw = "source_includes"

    def vector_function(self, field: str, query_vector: Sequence[float], weight: float) -> dict:
        return {
            "script_score": {
                "script": {
                    "source": "(cosineSimilarity(params.qv, params.field) + 1.0) / 2.0",
                    "params": {"qv": list(query_vector), "field": field},
                }
            },
            "weight": weight,
        }

    def ann_query(
        self, field: str, query_vector: Sequence[float], k: int, filters: list[dict]
    ) -> dict:
        clause: dict[str, Any] = {
            "field": field,
            "query_vector": list(query_vector),
            "k": k,
            # at most 10 000 (the engine's bound), never fewer than k
            "num_candidates": max(min(max(k * 2, 100), self.NATIVE_K), k),
        }
        if filters:
            clause["filter"] = filters
        return {"knn": clause}

    def vector_clause(
        self, field: str, query_vector: Sequence[float], k: int, filters: list[dict],
        weight: float,
    ) -> dict:  # fmt: skip
        # cosine: the knn score is (1 + cos) / 2, as the script's
        clause = self.ann_query(field, unit_vector(query_vector), k, filters)
        clause["knn"]["boost"] = weight
        return clause

    def _probe_painless(self) -> bool:
        try:
            langs = dict(self.client.get_script_languages())
        except Exception:  # cannot tell (no permission, no client): a full distribution
            return True
        contexts = langs.get("language_contexts")
        if not isinstance(contexts, list):
            return True
        return any(c.get("language") == "painless" for c in contexts if isinstance(c, dict))

    def search(
        self,
        index: str,
        body: dict[str, Any],
        ignore_unavailable: bool = False,
        routing: str | None = None,
    ) -> dict[str, Any]:
        reader = self.client.options(request_timeout=self.read_timeout)
        return dict(reader.search(index=index, **body, **_search_kw(ignore_unavailable, routing)))

    def _msearch(self, lines: list[dict[str, Any]]) -> Any:
        reader = self.client.options(request_timeout=self.read_timeout)
        return reader.msearch(searches=lines)

    def _mget_body(self, body: dict[str, Any], kw: dict[str, Any]) -> Any:
        reader = self.client.options(request_timeout=self.read_timeout)
        return reader.mget(docs=body["docs"], **kw)

    def bulk(
        self,
        lines: list[dict[str, Any]],
        refresh: bool | str = False,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        writer = self.client.options(request_timeout=timeout_s) if timeout_s else self.client
        return dict(writer.bulk(operations=lines, refresh=refresh))

    def create_index(self, index: str, body: dict[str, Any]) -> None:
        self.client.indices.create(index=index, **body)

    def update_aliases(self, actions: list[dict[str, Any]]) -> None:
        self.client.indices.update_aliases(actions=actions)

    def delete_by_query(self, index: str, body: dict[str, Any]) -> int:
        if getattr(self, "_no_reindex", False):
            return self._search_and_delete(index, body)
        try:
            resp = self.client.delete_by_query(
                index=index, query=body["query"], refresh=True, conflicts="proceed"
            )
        except CLIENT_ERRORS as exc:
            # 405/404/400 "no handler": a node without the reindex module (from Maven Central)
            if status_of(exc) not in (400, 404, 405) or "handler" not in str(exc).lower():
                raise
            self._no_reindex = True
            return self._search_and_delete(index, body)
        return _deleted(dict(resp))

    def _search_and_delete(self, index: str, body: dict[str, Any]) -> int:
        """Delete-by-query without the reindex module: search a page of matching ids, delete
        them in one bulk (refreshed), until none match. What was already gone is no error."""
        deleted = 0
        for _ in range(100_000):  # bounded: every round deletes at least one document
            resp = self.client.search(
                index=index, query=body["query"], size=DELETE_PAGE, _source=False,
                track_total_hits=False,
            )  # fmt: skip
            hits = resp["hits"]["hits"]
            if not hits:
                break
            lines = []
            for h in hits:
                meta = {"_index": h["_index"], "_id": h["_id"]}
                if h.get("_routing") is not None:
                    meta["routing"] = h["_routing"]
                lines.append({"delete": meta})
            res = dict(self.client.bulk(operations=lines, refresh=True))
            check_bulk(res, "deleting by query")
            gone = sum(1 for item in res["items"] if item["delete"].get("result") == "deleted")
            deleted += gone
            if not gone:
                break
        return deleted

    def put_index_template(self, name: str, body: dict[str, Any]) -> None:
        self.client.indices.put_index_template(name=name, **body)

    def put_mapping(self, index: str, properties: dict[str, Any]) -> None:
        self.client.indices.put_mapping(index=index, properties=properties)

    def open_pit(self, index: str, keep_alive: str, routing: str | None = None) -> str:
        kw = {"routing": routing} if routing else {}
        resp = self._within(self.read_timeout).open_point_in_time(
            index=index, keep_alive=keep_alive, **kw
        )
        return str(resp["id"])

    def search_pit(self, pit_id: str, keep_alive: str, body: dict[str, Any]) -> dict[str, Any]:
        reader = self.client.options(request_timeout=self.read_timeout)
        return dict(reader.search(pit={"id": pit_id, "keep_alive": keep_alive}, **body))

    def close_pit(self, pit_id: str) -> None:
        self._within(self.read_timeout).close_point_in_time(id=pit_id)

    def health(self, timeout_s: float | None = None) -> dict[str, Any]:
        return dict(self._within(timeout_s).cluster.health())

    def refresh(self, index: str, timeout_s: float | None = None) -> None:
        self._within(timeout_s).indices.refresh(index=index)

    def _within(self, timeout_s: float | None) -> Any:
        """The client, its call limited to ``timeout_s`` when given."""
        return self.client if timeout_s is None else self.client.options(request_timeout=timeout_s)

    def _count(
        self, index: str, body: dict[str, Any] | None, routing: str | None
    ) -> dict[str, Any]:
        reader = self.client.options(request_timeout=self.read_timeout)
        kw = {"routing": routing} if routing else {}
        return dict(reader.count(index=index, **(body or {}), **kw))


def unit_vector(vector: Sequence[float]) -> list[float]:
    """``vector`` at unit length (in double precision). A knn clause's similarity is the
    cosine only for a unit query vector (inner-product graphs; Elasticsearch's cosine did not
    divide by it either), and the model's vectors are 1 ± 1e-5 long: scores 1e-5 off."""
    norm = math.sqrt(math.fsum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


DELETE_PAGE = 1000  # ids per round of a delete-by-query without the reindex module


def _auth_kwargs(settings: Settings) -> dict[str, Any]:
    kw: dict[str, Any] = {"request_timeout": settings.es_timeout_s}
    if settings.es_api_key:
        kw["api_key"] = settings.es_api_key
    elif settings.es_username:
        kw["basic_auth"] = (settings.es_username, settings.es_password or "")
    if settings.es_ca_certs:
        kw["ca_certs"] = str(settings.es_ca_certs)
    if settings.url.startswith("https"):
        kw["verify_certs"] = settings.es_verify_certs
    return kw


def _opensearch_client(settings: Settings, asynchronous: bool = False) -> Any:
    import opensearchpy

    # opensearch-py defines AsyncOpenSearch only where aiohttp (the async extra) is installed
    client = opensearchpy.AsyncOpenSearch if asynchronous else opensearchpy.OpenSearch

    kw = _auth_kwargs(settings)
    kw["timeout"] = kw.pop("request_timeout")
    if "basic_auth" in kw:
        kw["http_auth"] = kw.pop("basic_auth")
    if "api_key" in kw:
        kw.setdefault("headers", {})["Authorization"] = f"ApiKey {kw.pop('api_key')}"
    # One retry on a dropped connection; a timeout is not retried (it would double the wait).
    kw["max_retries"] = settings.es_max_retries
    kw["retry_on_timeout"] = False
    # urllib3 keeps one connection by default: any second request at once (another thread,
    # the reinforcement flusher) opened a new connection and threw it away after, a TCP (and
    # TLS) handshake each time. aiohttp's connector takes the same bound as ``maxsize``.
    kw["pool_maxsize" if not asynchronous else "maxsize"] = settings.es_pool_size
    from kemem_es.engine.serialize import serializer

    return client(hosts=[settings.url], serializer=serializer(), **kw)


def _elasticsearch_client(settings: Settings, asynchronous: bool = False) -> Any:
    from elasticsearch import AsyncElasticsearch, Elasticsearch

    client = AsyncElasticsearch if asynchronous else Elasticsearch  # async: needs aiohttp
    return client(
        settings.url,
        max_retries=settings.es_max_retries,
        retry_on_timeout=False,
        connections_per_node=settings.es_pool_size,
        **_auth_kwargs(settings),
    )


# Where the version is read when GET / is refused (the Elasticsearch node from Maven Central
# answers it with 405; a restricted API key may get 403): the local node's info, then health.
NODES_INFO = "/_nodes/_local?filter_path=cluster_name,nodes.*.version,nodes.*.build_flavor"


def _root_info(settings: Settings) -> dict[str, Any]:
    """GET / without either client's product check, to learn the dialect and version; when the
    cluster refuses it (405, 404, 403), the local node's info says the same (a 200 there, not
    the root endpoint alone, is what "reachable" means)."""
    try:
        return _get_json(settings, "/")
    except urllib.error.HTTPError as exc:
        if exc.code not in (403, 404, 405):
            raise _http_unavailable(settings, exc) from None
    try:
        nodes = _get_json(settings, NODES_INFO)
    except urllib.error.HTTPError as exc:
        raise _http_unavailable(settings, exc) from None
    return info_from_nodes(nodes)


def info_from_nodes(nodes: dict[str, Any]) -> dict[str, Any]:
    """The root endpoint's answer rebuilt from ``GET /_nodes/_local``: Elasticsearch reports a
    build flavour (and its product header, kept by ``_get_json`` as ``_product``); OpenSearch
    neither."""
    node: dict[str, Any] = next(iter((nodes.get("nodes") or {}).values()), {})
    elastic = nodes.get("_product") == "Elasticsearch" or "build_flavor" in node
    version: dict[str, Any] = {"number": str(node.get("version", "?"))}
    if not elastic:
        version["distribution"] = "opensearch"
    return {"cluster_name": nodes.get("cluster_name"), "version": version, "via": "_nodes"}


def _http_unavailable(settings: Settings, exc: urllib.error.HTTPError) -> EngineUnavailable:
    return EngineUnavailable(
        f"search engine at {_redact(settings.url)} answered HTTP {exc.code}: {exc.reason}"
    )


def _get_json(settings: Settings, path: str) -> dict[str, Any]:
    """GET ``path`` of the cluster with the configured credentials; HTTP errors propagate,
    an unreachable cluster is EngineUnavailable."""
    import ssl
    import urllib.request

    req = urllib.request.Request(settings.url.rstrip("/") + path)
    if settings.es_api_key:
        req.add_header("Authorization", f"ApiKey {settings.es_api_key}")
    elif settings.es_username:
        import base64

        token = f"{settings.es_username}:{settings.es_password or ''}".encode()
        req.add_header("Authorization", "Basic " + base64.b64encode(token).decode())
    ctx = None
    if settings.url.startswith("https"):
        ctx = ssl.create_default_context(
            cafile=str(settings.es_ca_certs) if settings.es_ca_certs else None
        )
        if not settings.es_verify_certs:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    where = _redact(settings.url)
    try:
        with urllib.request.urlopen(req, timeout=min(settings.es_timeout_s, 10), context=ctx) as r:
            body = json.loads(r.read().decode())
            product = r.headers.get("X-elastic-product")
            if isinstance(body, dict) and product:
                body["_product"] = product
            return body
    except urllib.error.HTTPError:
        raise
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        hint = (
            "start the local engine with `kemem-es engine start`"
            if not settings.es_url
            else "check KEMEM_ES_URL and the network"
        )
        raise EngineUnavailable(
            f"cannot reach the search engine at {where} ({reason}); {hint}"
        ) from None


def _redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password:
        netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url


def detect_dialect(info: dict[str, Any]) -> str:
    distribution = info.get("version", {}).get("distribution", "elasticsearch")
    return "opensearch" if distribution == "opensearch" else "elasticsearch"


def connect(settings: Settings | None = None, bridge: Bridge | None = None) -> Engine:
    """Connect to the configured cluster (the local node when KEMEM_ES_URL is unset).

    With a ``bridge`` the engine runs on the official *async* client (see engine/bridge.py):
    the same Engine class, the same request code, each call awaited on the bridge's loop."""
    from kemem_es.engine.bridge import AwaitingClient, offload

    settings = settings or get_settings()
    info = offload(_root_info, settings)
    dialect = settings.dialect if settings.dialect != "auto" else detect_dialect(info)
    engine_cls: type[Engine]
    if dialect == "opensearch":
        engine_cls, make = OpenSearchEngine, _opensearch_client
    else:
        # The 8.x client sends compatible-with=8, which 9.x still serves (REST compatibility).
        major = str(info.get("version", {}).get("number", "8")).split(".")[0]
        if major not in ("8", "9"):
            raise EngineUnavailable(
                f"Elasticsearch {info.get('version', {}).get('number')} is not supported; use "
                "8.x or 9.x"
            )
        engine_cls, make = ElasticsearchEngine, _elasticsearch_client
    if bridge is None:
        return engine_cls(make(settings), settings, info)
    return engine_cls(AwaitingClient(make(settings, asynchronous=True), bridge), settings, info)
