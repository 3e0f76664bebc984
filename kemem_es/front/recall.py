"""Recall: ``query`` (the pipeline's front door), ``search`` (the Memory API's names),
``query_simple``, ``prepare_context`` and the prompt text of an answer."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from pydantic import TypeAdapter, ValidationError
from typing_extensions import Unpack

from kemem_es.contract.options import QueryOptions, SearchOptions
from kemem_es.contract.params import MAX_QUERY_CHARS, QueryParams, prepared_default
from kemem_es.contract.response import AdditionalInfo, QueryResponse, SimpleResponse
from kemem_es.engine.errors import deadline
from kemem_es.errors import EngineUnavailable, InvalidInput, activity, invalid_options
from kemem_es.front.parts import Parts
from kemem_es.memory.hooks import HookContext
from kemem_es.memory.inputs import utf8_text
from kemem_es.models import Time
from kemem_es.search.stopwatch import Stopwatch
from kemem_es.store.layout import KINDS, index_alias
from kemem_es.store.reinforce import recall_keys
from kemem_es.store.scope import query_scopes

log = logging.getLogger("kemem_es.kemem")  # the name these logs always had

NOW: TypeAdapter[datetime | None] = TypeAdapter(Time | None)


def _exclude_texts(value: object) -> list[str]:
    """``Kemem.prompt``'s ``exclude_texts`` as a list of texts: one ``str`` is one text (not
    its characters), None is none; otherwise an iterable of texts (None items are skipped).
    Anything else is ``InvalidInput`` naming the argument (a message dict: give its content)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise InvalidInput(
            f"exclude_texts: give a text or a list of texts, not {type(value).__name__}",
            field="exclude_texts",
        )
    texts = []
    for i, item in enumerate(value):
        if item is None:
            continue
        if not isinstance(item, str):
            raise InvalidInput(
                f"exclude_texts[{i}]: give a text, not {type(item).__name__}"
                + (" (a message: give its content)" if isinstance(item, Mapping) else ""),
                field="exclude_texts",
            )
        texts.append(item)
    return texts


def with_session(
    filters: Mapping[str, Any] | None, session_id: str | None
) -> Mapping[str, Any] | None:
    """``session_id=`` of get_all / search / count / delete_all (docs/SPEC.md §7): the filter
    ``{"session_id": …}`` together with the caller's own filters."""
    if session_id is None:
        return filters
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInput("session_id: a non-empty string", field="session_id")
    return (
        {"and": [dict(filters), {"session_id": session_id}]}
        if filters
        else {"session_id": session_id}
    )


def _degraded(text: str, params: QueryParams, reason: str, clock: Stopwatch) -> QueryResponse:
    """The empty-but-valid answer of a degraded query, with the time it took (``total``: the
    longest answers, a deadline's, are the ones worth timing)."""
    info = AdditionalInfo(
        timings_ms=clock.total(), query=text, tokens=[], base_words=[], expanded_words=[],
        mode=params.mode, degraded=True, degraded_reason=reason,
    )  # fmt: skip
    return QueryResponse(additional_info=info)


class Recall(Parts):
    def prepare_context(
        self,
        context: Any,
        *,
        context_turns: int | None = None,
        context_vector: str | None = None,
    ) -> bool:
        """Embed a dialogue's earlier turns now, off the request path (after the agent's reply
        is sent, before the user's next turn), for the query that brings them as its
        ``context``: that query then embeds its utterance only. ``context_vector`` says for
        which window vector: ``"turns"`` (each turn's own vector not cached yet) or
        ``"earlier"`` (the earlier turns' window); unset, the default's when it can be
        prepared, else ``"earlier"``. ``context`` as ``query`` takes it. Returns whether
        anything was computed."""
        self._open()
        extra: dict[str, Any] = {} if context_turns is None else {"context_turns": context_turns}
        extra["context_vector"] = context_vector or prepared_default()
        try:
            params = QueryParams(user_id="-", agent_id="-", context=context, **extra)
        except ValidationError as exc:
            raise invalid_options(exc) from None
        return self.searcher.prepare_context(params)

    def _export_window(self, context: Any) -> dict[str, Any] | None:
        """The earlier turns' window vector this process prepared, as a record another
        process can adopt (a session writes it onto its state: search.shared_window)."""
        self._open()
        return self.searcher.export_window(QueryParams(user_id="-", agent_id="-", context=context))

    def _adopt_window(self, context: Any, rec: Mapping[str, Any]) -> bool:
        """Take a window vector another process prepared for these turns (see above)."""
        self._open()
        params = QueryParams(user_id="-", agent_id="-", context=context)
        return self.searcher.adopt_window(params, rec)

    def query(
        self,
        text: str,
        *,
        user_id: str,
        agent_id: str,
        degrade: bool | None = None,
        reinforce: bool | None = None,
        **options: Unpack[QueryOptions],
    ) -> QueryResponse:
        """Recall events and entities for one utterance (options: see QueryParams).

        The engine part has one deadline, ``query_timeout_s`` for the whole call; a failure is
        a ``KememError`` (``EngineUnavailable``, ``DeadlineExceeded``...). ``degrade`` (default
        ``KEMEM_DEGRADE``): answer "no memories" instead, with ``additional_info.degraded`` and
        the reason — for a chat turn that should go on without memory rather than fail.
        ``reinforce=False``: a look that is not a recall (no strength gained, no activity)."""
        self._open()
        if not isinstance(text, str):
            kind_of = type(text).__name__
            raise InvalidInput(f"text: the utterance as a string, not {kind_of}", field="text")
        if len(text) > MAX_QUERY_CHARS:  # one turn; the CPU stages grow with it
            raise InvalidInput(
                f"text: {len(text):,} characters; at most {MAX_QUERY_CHARS:,} (one chat turn: "
                "earlier turns go in context)",
                field="text",
            )
        utf8_text(text, "text")
        try:
            params = QueryParams(user_id=user_id, agent_id=agent_id, **options)
        except ValidationError as exc:
            raise invalid_options(exc) from None
        clock = Stopwatch()
        try:
            self.warm_up()  # loading is not the query's time: the deadline starts after it
            clock = Stopwatch()
            with deadline(self.settings.query_timeout_s), activity("searching"):
                self._own_writes_visible(params.agent_id, params.user_id)
                resp = self.searcher.query(text, params)
        except EngineUnavailable as exc:
            if not (self.settings.degrade if degrade is None else degrade):
                raise
            log.warning("query degraded: %s", type(exc).__name__)  # the text may quote input
            return _degraded(text, params, str(exc), clock)
        if self.hooks.after_search:
            ctx = HookContext(agent_id, user_id, "user", query=text)
            resp = self.hooks.run_after_search(resp, ctx)
        if reinforce is not False:
            self._recalled(params, resp, self.settings.reinforce if reinforce is None else True)
        return resp

    def _own_writes_visible(self, agent_id: str, user_id: str) -> None:
        """Read-your-own-writes for a query (``store.fresh``: best effort, within its deadline)."""
        from kemem_es.store import fresh

        reads = [
            (index_alias(self.settings.index_prefix, scope.db, k), scope.routing)
            for scope in query_scopes(agent_id, user_id)
            for k in KINDS
        ]
        fresh.before_read(self.engine, reads, self.engine.read_timeout)

    def _recalled(self, params: QueryParams, resp: QueryResponse, strengthen: bool) -> None:
        """The user was active; with ``strengthen``, queue +strength for every memory of the
        user's the query returned, and of the agent's official ones with ``reinforce_official``
        (written in the background, off the critical path)."""
        user, official = query_scopes(params.agent_id, params.user_id)
        prefix, with_official = self.settings.index_prefix, self.settings.reinforce_official
        keys = recall_keys(prefix, user, official, resp, with_official) if strengthen else []
        if keys:
            self.reinforcer.recalled(keys, datetime.now(timezone.utc))
        self.reinforcer.active(user)

    def query_simple(
        self, text: str, *, user_id: str, agent_id: str, **options: Unpack[QueryOptions]
    ) -> SimpleResponse:
        """Only the memory texts, in order of importance."""
        return self.query(text, user_id=user_id, agent_id=agent_id, **options).simple()

    def prompt(
        self,
        response: QueryResponse,
        now: datetime | str | None = None,
        user_name: str | None = None,
        agent_name: str | None = None,
        exclude_texts: str | Iterable[str] | None = (),
    ) -> str:
        """docs/SPEC.md §5 prompt text for the ``QueryResponse`` that ``query`` / ``search``
        returned. ``exclude_texts``: what the dialogue already holds, as texts (one ``str`` is
        one text: the whole dialogue may be given as it is); a memory one of them contains is
        left out. ``now`` follows the records' time rule, as ``query``'s does (a date string
        works); an event written with an offset is shown on now's wall clock, so give ``now``
        in the user's zone (default: this machine's clock, in its zone). A wrong type for any
        argument is ``InvalidInput`` naming it."""
        from kemem_es.prompt import render_prompt

        if not isinstance(response, QueryResponse):
            hint = " (not its to_contract() dict)" if isinstance(response, Mapping) else ""
            raise InvalidInput(
                f"response: give the QueryResponse that query or search returned{hint}, "
                f"not {type(response).__name__}",
                field="response",
            )
        try:
            when = NOW.validate_python(now)
        except ValidationError as exc:
            why = exc.errors()[0]["msg"] if exc.errors() else str(exc)
            raise InvalidInput(f"now: {why}", field="now") from None
        for field, name in (("user_name", user_name), ("agent_name", agent_name)):
            if name is not None and not isinstance(name, str):
                raise InvalidInput(
                    f"{field}: give a text or None, not {type(name).__name__}", field=field
                )
        return render_prompt(
            response.memory_events,
            response.memory_entities,
            when or datetime.now().astimezone(),
            user_name,
            agent_name,
            _exclude_texts(exclude_texts),
        )

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        limit: int = 5,
        filters: Mapping[str, Any] | None = None,
        threshold: float | None = None,
        session_id: str | None = None,
        degrade: bool | None = None,
        reinforce: bool | None = None,
        **options: Unpack[SearchOptions],
    ) -> QueryResponse:
        """Recall for a chat turn: ``query`` with the Memory API's names (``threshold`` is the
        score threshold; ``reinforce=False``: a look, not a recall); other options as in ``query``.
        Unknown options raise, and so does
        ``top_k``: elsewhere the number of results, in ``query`` the number of base words, so
        here the number of results is ``limit``."""
        if "top_k" in options:
            raise InvalidInput(
                "top_k: the number of results is `limit` here (top_k=… is the number of base "
                "words of the keyword expansion, a query() option)",
                field="top_k",
            )
        if threshold is not None:
            if "score_threshold" in options:
                raise InvalidInput(
                    "threshold: give threshold or score_threshold, not both", field="threshold"
                )
            options["score_threshold"] = threshold
        return self.query(
            query,
            user_id=user_id,
            agent_id=self._scope(agent_id, user_id, "user").agent_id,
            limit=limit,
            filters=with_session(filters, session_id),
            degrade=degrade,
            reinforce=reinforce,
            **options,
        )
