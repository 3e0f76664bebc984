"""One error tree. Client-library errors are translated once, at the store/engine seam, so
callers only ever see a :class:`KememError` whose message is meant for a person as is."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, NoReturn, ParamSpec, TypeVar

if TYPE_CHECKING:
    from pydantic import ValidationError

# What the caller is doing (``activity``): the first words of a translated engine error.
_ACTIVITY: ContextVar[str] = ContextVar("kemem_activity", default="search engine")


@contextmanager
def activity(doing: str) -> Iterator[None]:
    """Name what the engine requests inside are for: an engine error raised by any of them
    says ``doing: ...`` (the innermost activity wins). It only labels: the engine's request
    method (engine/client.py) translates client errors, once."""
    token = _ACTIVITY.set(doing)
    try:
        yield
    finally:
        _ACTIVITY.reset(token)


def current_activity() -> str:
    """The innermost ``activity`` (``search engine`` outside any)."""
    return _ACTIVITY.get()


P = ParamSpec("P")
T = TypeVar("T")
log = logging.getLogger("kemem_es")


class KememError(Exception):
    """Base class: the message is meant for the user as is."""

    # Set on an error translated from a client error (engine/errors.py): the engine's own words
    # without what we were doing, and whether the engine answered (a write it did not answer
    # may still be applied later).
    reason: str = ""
    answered: bool = True


class EngineUnavailable(KememError):
    """The search engine cannot be reached or answered with something unusable."""


class DeadlineExceeded(EngineUnavailable):
    """A query ran out of its time budget (``query_timeout_s``) before the engine answered."""


class Overloaded(EngineUnavailable):
    """The engine refused work because it is busy (HTTP 429): retry later."""


class EngineSetupError(KememError):
    """The local engine cannot be installed or started (missing JDK, Maven, port in use...)."""


class MappingConflict(KememError):
    """An existing index was built from an incompatible template; we refuse to mix."""


class InvalidInput(KememError):
    """Input failed validation; nothing was written. ``problems`` names each record and field,
    ``field`` the one field at fault when there is a single one."""

    def __init__(
        self, message: str, problems: list[str] | None = None, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.problems = problems or []
        self.field = field


class ExtractionError(KememError):
    """``infer=True`` could not turn the messages into records: the extractor (an LLM endpoint)
    was unreachable, slow, refused us, or answered with something that is not valid entity /
    event JSON. Extraction fails as a whole: nothing of it is written. ``problems`` names each
    bad item and field (``events[0].description: Field required``). ``detail``: an excerpt
    of the upstream's own error body (scrubbed of the key), never part of the message, which
    may reach HTTP clients."""

    def __init__(
        self, message: str, problems: list[str] | None = None, detail: str | None = None
    ) -> None:
        super().__init__(message)
        self.problems = problems or []
        self.detail = detail


class ExtractorNotConfigured(ExtractionError):
    """``infer`` was asked of an instance with no LLM configured (KEMEM_LLM_BASE_URL,
    KEMEM_LLM_MODEL): nothing went wrong upstream — there is no upstream. Raised before
    anything is written, for ``infer="background"`` too (the server answers 422, field
    ``infer``)."""


class ExtractionPending(KememError):
    """``drain(timeout_s)`` ran out of time with ``pending`` background extractions still
    running: they stay tracked (finished ones too), so a later ``drain()`` waits for them and
    returns what they stored."""

    def __init__(self, message: str, pending: int) -> None:
        super().__init__(message)
        self.pending = pending


class EngineRefused(InvalidInput):
    """The engine refused our request as malformed (HTTP 400), or the client could not even
    encode it (a number past 64 bits): something in the input it cannot take. Not an outage —
    the same request fails the same way again — so it is no ``EngineUnavailable``."""


class Forbidden(KememError):
    """The caller (its API key, or the MCP server's configuration) may not serve that agent;
    nothing was read or written. ``field`` names the argument (``agent_id``)."""

    def __init__(self, message: str, field: str = "agent_id") -> None:
        super().__init__(message)
        self.field = field


class ConcurrentChange(KememError):
    """The memory changed between our read and our write: another writer got there first.
    Retried inside (with a short jittered backoff); raised to the caller only when it kept
    changing. Nothing was written: try again shortly (the server answers 409)."""


class NotFound(KememError):
    """No memory with this id in this scope (another scope's memory is reported the same way)."""


class Closed(KememError):
    """The instance was closed (``close()`` / ``aclose()`` / the end of its ``with``): its
    background writers are stopped, so a recall's reinforcement or a user's activity would be
    queued and never written. Build a new instance instead."""


class WrongEventLoop(KememError):
    """An AsyncKemem used on another event loop than the one of its first call: its engine
    client belongs to that loop (closed or not running here). Use one AsyncKemem per loop."""


class InternalError(KememError):
    """A failure kemem-es did not foresee (a bug: please report it). The original exception
    is its ``__cause__`` and its traceback is logged at DEBUG; the message names only its type
    (an exception's text may quote the input). Every public verb raises nothing but
    KememError subclasses: this is the net under the others."""


class WriteInterrupted(EngineUnavailable):
    """A multi-batch write stopped part-way; ``written`` says how far it got, ``unknown`` how
    many records were sent without an answer (the engine may still apply them). Re-running the
    same import resumes: what was written is recognised as unchanged."""

    def __init__(self, message: str, written: int, unknown: int = 0) -> None:
        super().__init__(message)
        self.written = written
        self.unknown = unknown


def invalid_options(exc: ValidationError) -> InvalidInput:
    """A pydantic error on call options as one InvalidInput naming the first bad option."""
    errs = exc.errors()
    problems = [f"{'.'.join(str(p) for p in e['loc']) or '(options)'}: {e['msg']}" for e in errs]
    field = ".".join(str(p) for p in errs[0]["loc"]) if errs else None
    if errs and errs[0]["type"] == "extra_forbidden":
        problems[0] = f"{field}: unknown option"
    return InvalidInput(problems[0] if problems else str(exc), problems, field=field)


def guarded(verb: Callable[P, T]) -> Callable[P, T]:
    """A public verb that lets only KememError subclasses escape: input nested past Python's
    recursion limit, and arguments the verb's signature refuses (a missing ``agent_id``), are
    InvalidInput; an engine client's exception that escaped its seam is translated there;
    anything else is an InternalError (a bug), chained."""

    @functools.wraps(verb)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return verb(*args, **kwargs)
        except KememError:
            raise
        except RecursionError:
            raise InvalidInput("input nested too deeply") from None
        except TypeError as exc:
            tb = exc.__traceback__
            if tb is not None and tb.tb_next is None:  # raised by this call: the arguments
                raise InvalidInput(f"{verb.__name__}: {exc}") from None
            _internal(verb.__name__, exc)
        except Exception as exc:
            from kemem_es.engine.errors import CLIENT_ERRORS, translate_client_error

            if isinstance(exc, CLIENT_ERRORS):
                raise translate_client_error(exc, verb.__name__) from exc
            _internal(verb.__name__, exc)

    return call


def _internal(name: str, exc: Exception) -> NoReturn:
    log.debug("%s failed unexpectedly", name, exc_info=exc)
    raise InternalError(
        f"{name} failed unexpectedly ({type(exc).__name__}): a bug in "
        "kemem-es, please report it (the traceback is logged at DEBUG)"
    ) from exc
