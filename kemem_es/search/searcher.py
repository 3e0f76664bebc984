"""The query pipeline (docs/SPEC.md §2): tokenise → base words → expand → embed (``query_text``) →
events and entities in one round trip (bodies from ``events``/``entities``/``modes``) → assemble
(``hits``), each stage timed in milliseconds."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from kemem_es.contract.params import QueryParams
from kemem_es.contract.response import AdditionalInfo, QueryResponse
from kemem_es.embed.calibrate import apply as apply_calibration
from kemem_es.engine.errors import raise_engine_error, shard_failure
from kemem_es.errors import EngineUnavailable
from kemem_es.runtime import offload
from kemem_es.search.clauses import SearchWord
from kemem_es.search.entity_search import EntitySearch, shown_entities
from kemem_es.search.facts import (
    resolve_past,
    resolve_timeframe,
    slot_clauses,
    slot_order,
    time_order,
)
from kemem_es.search.hits import entity_hit, event_hit
from kemem_es.search.profile import script_params
from kemem_es.search.rewrite import RewriteFailed
from kemem_es.search.scope_size import COUNT_TTL_S, EXACT_MAX_DOCS
from kemem_es.search.searcher_base import (
    EventResult,
    SearcherBase,
    _missing_index,
    _not_initialised,
)
from kemem_es.search.stopwatch import Stopwatch
from kemem_es.search.topic_shift import applies as shift_applies
from kemem_es.search.window_scale import rescaled
from kemem_es.store.embedding import refuse_other_model
from kemem_es.store.embedding import stored as stored_calibration
from kemem_es.store.names import Names
from kemem_es.store.scope import Scope
from kemem_es.text import BaseWord
from kemem_es.text.dialogue import Turn, context_turns, is_small_talk, utterance_of
from kemem_es.text.timeframe import Timeframe

__all__ = [
    "COUNT_TTL_S",
    "EXACT_MAX_DOCS",
    "EventResult",
    "Searcher",
    "SearcherBase",
    "raise_engine_error",
    "shown_entities",
]


class QueryPlan(NamedTuple):
    """``Searcher.plan``: a query's resolved parameters, vectors and words."""

    params: QueryParams
    profile: str
    frame: Timeframe | None
    limit: int
    slots: list[dict[str, Any]]
    vector: list[float]
    trimmed: bool
    parts: list[list[float]]
    names: Names
    base: Sequence[BaseWord]
    tokens: Sequence[str]
    expanded: Sequence[tuple[str, int]]
    words: list[SearchWord]


class Searcher(EntitySearch):
    """Runs a query's plan on the engine: the text side (``text``: words and vectors), then the
    event and entity searches in one round trip, then the answer. Holds the long-lived parts
    (engine client, model, tokenizer, lexicon) and the engine-side caches across queries."""

    def calibration(self) -> dict[str, Any]:
        """The vector scale queries are scored on (embed.calibrate): the one stored with the
        indices, else the model's own, measured here; empty for a caller's own embedder on
        indices without one (the reference constants). Read once. Indices written by another
        model are refused (store.embedding), never scored on this model's scale."""
        if self._calibration is None:
            from kemem_es.embed.calibrate import for_embedder

            model = self.text.embedder.name
            found = stored_calibration(self.engine)
            prefix = self.engine.settings.index_prefix
            refuse_other_model(found, model, f"the indices under prefix {prefix!r}")
            self._calibration = found or for_embedder(self.text.embedder) or {}
        return self._calibration

    def warm_up(self) -> None:
        """Load jieba, the IDF table and the model now, not on the first query."""
        self.text.words("预热一下", QueryParams(agent_id="-", user_id="-"), Stopwatch())
        self.text.embedder.embed_one("预热一下")
        # One whole query on a scope that holds nothing: both searches' code paths, the
        # engine's scripts and the scope counts' cache warmed before the first user's query.
        with contextlib.suppress(Exception):  # a warm-up never fails the searcher
            self.query("预热一下", QueryParams(agent_id="-", user_id="-", path="approx"))

    def _rewrite(self, utterance: str, turns: Sequence[Turn]) -> tuple[str, dict[str, str]]:
        """The rewriter's search text for the utterance and its turns, or the utterance with
        why it is searched as it is (never an error: rewriting only ever helps)."""
        if self.rewriter is None:
            return utterance, {"fallback": "no rewriting model (set KEMEM_REWRITE_MODEL)"}
        try:
            text = offload(self.rewriter.rewrite, utterance, turns)
        except RewriteFailed as exc:
            return utterance, {"fallback": str(exc)}
        except Exception as exc:  # a rewriter's bug must not fail the chat turn
            return utterance, {"fallback": f"the rewriter failed ({type(exc).__name__})"}
        return text, {"text": text}

    def prepare_context(self, params: QueryParams) -> bool:
        """``QueryText.prepare_context`` for the turns ``params.context`` holds."""
        turns = context_turns(params.context, params.context_turns)
        return bool(offload(self.text.prepare_context, turns, params.context_vector))

    def export_window(self, params: QueryParams) -> dict[str, Any] | None:
        """``QueryText.export_window`` for the turns ``params.context`` holds."""
        return self.text.export_window(context_turns(params.context, params.context_turns))

    def adopt_window(self, params: QueryParams, rec: Mapping[str, Any]) -> bool:
        """``QueryText.adopt_window`` for the turns ``params.context`` holds."""
        return self.text.adopt_window(context_turns(params.context, params.context_turns), rec)

    # -- the whole pipeline ----------------------------------------------------------------
    def query(self, text: str, params: QueryParams) -> QueryResponse:
        try:
            return self._query(text, params)
        except EngineUnavailable:
            raise
        except Exception as err:
            if _missing_index(err):
                raise _not_initialised(self.engine.settings.index_prefix) from err
            raise

    def _query(self, text: str, params: QueryParams) -> QueryResponse:
        clock = Stopwatch()
        now = params.now or datetime.now()
        turns = context_turns(params.context, params.context_turns)
        speakers = [params.user_name, params.agent_name, *(t.speaker for t in turns)]
        utterance = utterance_of(text, speakers) if text.strip() else text
        if params.prefilter and is_small_talk(utterance):
            return _small_talk(text, params, clock)
        rewrite = None
        if params.rewrite:
            utterance, rewrite = self._rewrite(utterance, turns)
            clock.lap("rewrite")
        plan = self.plan(utterance, turns, params, now, clock)
        params, words, vector, names = plan.params, plan.words, plan.vector, plan.names
        frame, limit = plan.frame, plan.limit
        # the utterance's own vector, computed with the query vector (search.topic_shift)
        own = self.text.utterance_vector(utterance) if shift_applies(params, words) else None
        event_hits, entity_hits, missing, bridges, answered = self._search(
            params, words, vector, now, plan.parts, plan.slots, names, clock, own
        )
        # the period the utterance names first (search.facts); then of two facts of one slot,
        # the newer first (the older for a question about the past)
        event_hits = time_order(event_hits, lambda r: r[1]["_source"], lambda r: r[2], frame,
                                params, limit)  # fmt: skip
        entity_hits = time_order(entity_hits, lambda r: r[0]["_source"], lambda r: r[1], frame,
                                 params, entities=True)  # fmt: skip
        event_hits = slot_order(event_hits, lambda r: r[1]["_source"], bool(params.past))
        entity_hits = slot_order(entity_hits, lambda r: r[0]["_source"], bool(params.past))
        clock.lap("search_events")
        events = [
            event_hit(i, db, hit, score, signals, now)
            for i, (db, hit, score, signals) in enumerate(event_hits)
        ]
        entities = [entity_hit(i, hit, score, words) for i, (hit, score) in enumerate(entity_hits)]
        clock.lap("assemble")
        info = AdditionalInfo(
            timings_ms=clock.total(),
            query=text,
            tokens=plan.tokens,
            base_words=[b.word for b in plan.base],
            expanded_words=[{w: lvl} for w, lvl in plan.expanded],
            mode=params.mode,
            context_words=[w.word for w in words if w.context],
            entity_words=[w.word for w in bridges],
            context_trimmed=plan.trimmed,
            profile=plan.profile,
            rewrite=rewrite,
        )
        _mark_degraded(info, missing, answered)
        return QueryResponse(memory_events=events, memory_entities=entities, additional_info=info)

    def plan(
        self,
        utterance: str,
        turns: Sequence[Turn],
        params: QueryParams,
        now: datetime,
        clock: Stopwatch,
    ) -> QueryPlan:
        """What a query sends, before it is sent: the parameters resolved for this model,
        script and utterance (calibration, profile, time frame, past), the slot clauses, the
        vectors (stage ``embed``) and the search words (``tokenize``/``expand``). The benchmarks
        that replay or take apart a query start from it too."""
        params = apply_calibration(params, self.calibration())
        params, profile = script_params(params, [utterance, *(t.text for t in turns)])
        params, frame, limit = resolve_timeframe(params, utterance, now)  # search.facts
        params = resolve_past(params, utterance)
        slots = slot_clauses(params, utterance)
        vector, trimmed, parts, scale = offload(self.text.query_vectors, utterance, turns, params)
        params = rescaled(params, scale)  # a rebuilt window read on the joint window's scale
        clock.lap("embed")
        names = self.names.visible(Scope.of(agent_id=params.agent_id, user_id=params.user_id))
        base, tokens, expanded, words = offload(
            self.text.words, utterance, params, clock, turns, vector, names
        )
        return QueryPlan(
            params, profile, frame, limit, slots, vector, trimmed, parts, names, base, tokens,
            expanded, words,
        )  # fmt: skip

    def _search(
        self,
        params: QueryParams,
        words: list[SearchWord],
        vector: Sequence[float],
        now: datetime,
        parts: Sequence[Sequence[float]],
        slots: Sequence[dict[str, Any]],
        names: Names,
        clock: Stopwatch,
        own: Sequence[float] | None = None,
    ) -> tuple[
        list[EventResult],
        list[tuple[dict[str, Any], float]],
        list[str],
        list[SearchWord],
        list[dict[str, Any]],
    ]:
        """The event and entity searches of a query: (event hits, shown entity hits, missing
        databases, bridge words, every response the answer is made from). ``own``: the
        utterance's own vector when it has earlier turns (``topic_shift``)."""
        # Entities and events in one round trip, which the engine serves in parallel. The
        # entities can lend the events bridge words (``bridge_words``); only then, a few
        # queries in a hundred, is the event search sent again with them.
        searches, dbs = self.event_searches(params, words, vector, now, parts, slots)
        entity_search = self.entity_search(params, words, vector, slots)
        extra = [entity_search] if entity_search is not None else []
        responses = self.engine.msearch([*searches, *extra])
        clock.lap("search_events")
        extra_responses = responses[len(searches) :]
        scored_entities = self.score_entities(params, responses[-1]) if extra else []
        bridges = self.text.bridge_words(params, words, scored_entities, names)
        entity_hits = shown_entities(params, scored_entities)
        clock.lap("search_entities")
        if bridges:
            searches, dbs = self.event_searches(
                params, [*words, *bridges], vector, now, parts, slots
            )
            responses = self.engine.msearch(searches)
        event_hits, missing = self.rank_events(params, dbs, responses[: len(searches)], own, vector)
        answered = [*responses[: len(searches)], *extra_responses]
        return event_hits, entity_hits, missing, bridges, answered


def _small_talk(text: str, params: QueryParams, clock: Stopwatch) -> QueryResponse:
    """Greetings, acknowledgements, laughter, emoji: nothing to recall, no search."""
    clock.lap("prefilter")
    info = AdditionalInfo(
        timings_ms=clock.total(),
        query=text,
        tokens=[],
        base_words=[],
        expanded_words=[],
        mode=params.mode,
        skipped="small_talk",
    )
    return QueryResponse(additional_info=info)


def _mark_degraded(
    info: AdditionalInfo, missing: list[str], answered: list[dict[str, Any]]
) -> None:
    """A missing events index or a partial search: the answer says so."""
    reasons = (
        [
            f"the {' and '.join(missing)} events index is missing (run `kemem-es init`): "
            "answered from the others"
        ]
        if missing
        else []
    )
    partial = [f for r in answered if (f := shard_failure(r))]
    if partial:  # the chat path still answers, but says its answer may be short
        reasons.append(f"a search was partial: {partial[0]}: answered from the rest")
    if reasons:
        info.degraded = True
        info.degraded_reason = "; ".join(reasons)
