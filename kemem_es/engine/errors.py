"""Client errors → KememError, in one place.

Both official clients raise their own exception trees; ``Engine.request`` (engine/client.py)
hands every one of them to ``translate_client_error`` once, so nothing above engine/ ever sees a
client exception. The answer checks here (a failed msearch item, failed shards, failed bulk
items, a document the engine could not read) turn an engine's 200-with-errors into the same
KememErrors.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from kemem_es.errors import (
    DeadlineExceeded,
    EngineRefused,
    EngineUnavailable,
    KememError,
    Overloaded,
    activity,  # noqa: F401 - re-exported: where engine callers find it
)

# (monotonic end, seconds given) of the call in progress; see ``deadline``.
_DEADLINE: ContextVar[tuple[float, float] | None] = ContextVar("kemem_deadline", default=None)


def _client_errors() -> tuple[type[Exception], ...]:
    from opensearchpy.exceptions import OpenSearchException

    try:  # the Elasticsearch client is an extra (``kemem-es[elasticsearch]``)
        from elastic_transport import TransportError
        from elasticsearch import ApiError
    except ImportError:
        return (OpenSearchException,)
    return (OpenSearchException, ApiError, TransportError)


def _serialization_errors() -> tuple[type[Exception], ...]:
    from opensearchpy.exceptions import SerializationError

    try:
        from elastic_transport import SerializationError as TransportSerializationError
    except ImportError:
        return (SerializationError,)
    return (SerializationError, TransportSerializationError)


CLIENT_ERRORS = _client_errors()
# The client could not encode (or decode) a body; its text quotes the whole body.
SERIALIZATION_ERRORS = _serialization_errors()

# What to do about an engine error, by a pattern of its text.
REMEDIES = {
    "index_not_found": "nothing indexed under this prefix yet: run `kemem-es init` / "
    "`kemem-es index`",
    "already[_ ]closed": "OpenSearch 3.5 closed this index's vector file after a scroll over "
    "it (k-NN issues 3191, 3458; docs/operations.md): close and reopen the index "
    "(`kemem-es doctor --agent A --reopen`) or restart the node, and page with search_after "
    "instead of scrolling",
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
    ``Overloaded``, a timeout ``DeadlineExceeded``, anything else ``EngineUnavailable``. The
    error keeps the engine's own words (``reason``) and whether the engine answered at all
    (``answered``: a write without an answer may still be applied later)."""
    err = _translated(exc, doing)
    err.reason = describe_client_error(exc)
    err.answered = status_of(exc) is not None or isinstance(exc, SERIALIZATION_ERRORS)
    return err


def _translated(exc: Exception, doing: str) -> KememError:
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
    """Translate either client's exceptions into a KememError (see ``translate_client_error``).
    For raw client calls in tests and benchmarks; the package's calls all go through
    ``Engine.request``, which translates them itself."""
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


def time_left(default: float) -> float:
    """What is left of the call's deadline (see ``deadline``), else ``default``; past it,
    ``DeadlineExceeded``."""
    current = _DEADLINE.get()
    if current is None:
        return default
    end, given = current
    left = end - time.monotonic()
    if left < 0.005:
        raise DeadlineExceeded(f"the query's deadline of {given:g} s passed")
    return left


def deleted_count(resp: dict[str, Any]) -> int:
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


def found(doc: dict[str, Any]) -> bool:
    """One document of an mget: found, or missing (also when its index is); a document the
    engine failed to read raises, so that a broken index is not taken for a missing memory."""
    if doc.get("found"):
        return True
    error = doc.get("error")
    if not error or "index_not_found" in str(error):
        return False
    where = doc.get("_index", "a document")
    raise EngineUnavailable(with_remedy(f"reading {where}: {error_reason(error)}"))


def status_of(exc: Exception) -> int | None:
    """HTTP status carried by either client's exception (opensearch-py: status_code; es: meta)."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status
    meta = getattr(exc, "meta", None)
    return getattr(meta, "status", None)
