"""The query pipeline (docs/SPEC.md §2): tokenise → base words → expand → embed (``query_text``) →
events and entities in one round trip (bodies from ``events``/``entities``/``modes``) → assemble
(``hits``), each stage timed in milliseconds."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from kemem_es.contract.params import QueryParams
from kemem_es.contract.response import AdditionalInfo, QueryResponse, Signals
from kemem_es.embed.calibrate import apply as apply_calibration
from kemem_es.engine.client import Engine, Search
from kemem_es.engine.errors import raise_engine_error, shard_failure
from kemem_es.errors import EngineUnavailable
from kemem_es.expand.expander import Expander
from kemem_es.models import Database
from kemem_es.runtime import offload
from kemem_es.search import anchor
from kemem_es.search import events as ev
from kemem_es.search.clauses import (
    EVENT_FIELDS,
    SearchWord,
    coverage_clauses,
    keyword_clauses,
    proximity_clauses,
)
from kemem_es.search.entities import TIER_OF_KIND, entity_body, entity_offset, shown_limit
from kemem_es.search.explain import signals_from_explanation
from kemem_es.search.facts import (
    resolve_past,
    resolve_timeframe,
    slot_clauses,
    slot_order,
    time_order,
)
from kemem_es.search.fusion import rrf_merge
from kemem_es.search.hits import entity_hit, event_hit, instant
from kemem_es.search.modes import BodyArgs, mode_bodies, mode_weights
from kemem_es.search.profile import script_params
from kemem_es.search.query_text import QueryText
from kemem_es.search.rewrite import RewriteFailed, Rewriter
from kemem_es.search.stopwatch import Stopwatch
from kemem_es.store.bulk import TextEmbedder
from kemem_es.store.embedding import refuse_other_model
from kemem_es.store.embedding import stored as stored_calibration
from kemem_es.store.layout import DATABASES, index_alias
from kemem_es.store.names import ScopeNames
from kemem_es.store.scope import Scope
from kemem_es.text.dialogue import Turn, context_turns, is_small_talk, utterance_of
from kemem_es.text.tokenizer import Tokenizer

# Up to this many memories in scope, every one is scored (exact); measured at 20k in scope on
# 2 cores: exact 13 ms vs approximate 5 ms of engine time.
EXACT_MAX_DOCS = 2_000
COUNT_TTL_S = 60.0
# an event answer: (database, engine hit, calibrated score, signals when explained)
EventResult = tuple[Database, dict[str, Any], float, Signals | None]


def shown_entities(
    params: QueryParams, scored: Sequence[tuple[dict[str, Any], float]]
) -> list[tuple[dict[str, Any], float]]:
    """The entities the answer shows: the best ``entity_limit`` (``limit`` when unset) by
    evidence among those reaching ``entity_threshold``, in ``scored``'s (tier) order. The
    rest of ``scored`` is the bridge's window only."""
    eligible = [hs for hs in scored if hs[1] >= params.entity_threshold]
    best = sorted(eligible, key=lambda hs: -float(hs[0]["_score"]))[: shown_limit(params)]
    keep = {id(hs[0]) for hs in best}
    return [hs for hs in eligible if id(hs[0]) in keep]


def _missing_index(err: BaseException) -> bool:
    """Both clients raise a NotFoundError (HTTP 404) for a missing index."""
    return type(err).__name__ == "NotFoundError" or "index_not_found" in str(err)


def _not_initialised(prefix: str) -> EngineUnavailable:
    return EngineUnavailable(
        f"no memory indices under prefix {prefix!r}: run `kemem-es init` (or Kemem.init()) first"
    )


class Searcher:
    """Runs a query's plan on the engine: the text side (``text``: words and vectors), then the
    event and entity searches in one round trip, then the answer. Holds the long-lived parts
    (engine client, model, tokenizer, lexicon) and the engine-side caches across queries."""

    def __init__(
        self,
        engine: Engine,
        embedder: TextEmbedder,
        tokenizer: Tokenizer,
        expander: Expander | None,
        names: ScopeNames | None = None,
    ) -> None:
        self.engine = engine
        self.text = QueryText(embedder, tokenizer, expander)
        self.names = names if names is not None else ScopeNames(engine)
        # (alias, agent, user, filters) → (when, in scope, on shard); a tuple, not a joined
        # string: ids may hold any separator ("a|b" + "c" and "a" + "b|c" shared one entry)
        self._counts: dict[tuple[str, str, str | None, str], tuple[float, int, int]] = {}
        self._calibration: dict[str, Any] | None = None
        self.rewriter: Rewriter | None = None  # QueryParams.rewrite (search.rewrite)

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
        return bool(offload(self.text.prepare_context, turns))

    def _approx(self, db: Database, params: QueryParams) -> bool:
        """auto: exact scoring while the scope is small, the ANN ∪ keyword window beyond.
        Scope sizes are counted by the engine and cached for a minute."""
        if params.path != "auto":
            return params.path == "approx"
        return self._scope_counts(db, params)[0] > EXACT_MAX_DOCS

    def _scope_counts(self, db: Database, params: QueryParams) -> tuple[int, int]:
        """(memories in scope, memories on the scope's shard), counted by the engine, cached a
        minute."""
        alias = index_alias(self.engine.settings.index_prefix, db, "events")
        user = params.user_id if db == "user" else None
        key = (alias, params.agent_id, user, repr(params.filters))
        cached = self._counts.get(key)
        if cached is None or time.monotonic() - cached[0] > COUNT_TTL_S:
            scope = {"bool": {"filter": ev.request_filters(db, params)}}
            routing = ev.routing(db, params)
            try:
                n_scope = self.engine.count(alias, scope, routing)
                cached = (time.monotonic(), n_scope, self.engine.count(alias, routing=routing))
            except Exception as err:  # a missing index: the event search will say so
                if not _missing_index(err):
                    raise
                return 0, 0
            self._counts[key] = cached
        return cached[1], cached[2]

    def _ann_filtered(self, db: Database, params: QueryParams, approx: bool) -> bool:
        """Whether the ANN clause needs the scope as its own filter. Not when the scope is all
        its shard holds (one agent's official db): the filter then removes nothing, and building
        it costs a pass over every document (~6 ms a query at 1M). The window's own filter
        still applies, so a memory written outside the scope within the count's minute can
        only take an ANN slot, never be returned."""
        if not approx:
            return True
        n_scope, n_index = self._scope_counts(db, params)
        return n_scope < n_index

    def search_events(
        self,
        params: QueryParams,
        words: Sequence[SearchWord],
        vector: Sequence[float],
        now: datetime,
        parts: Sequence[Sequence[float]] = (),
    ) -> tuple[list[EventResult], list[str]]:
        """(db, hit, score, signals) best first, after threshold and limit; scores calibrated.
        Also the databases whose events index is missing: the others still answer (a missing
        official index must not cost the user's own memories); all missing is an error."""
        searches, dbs = self.event_searches(params, words, vector, now, parts)
        return self.rank_events(params, dbs, self.engine.msearch(searches))

    def event_searches(
        self,
        params: QueryParams,
        words: Sequence[SearchWord],
        vector: Sequence[float],
        now: datetime,
        parts: Sequence[Sequence[float]] = (),
        slots: Sequence[dict[str, Any]] = (),
    ) -> tuple[list[Search], list[Database]]:
        """The event searches of a query (one or two per database, by mode) and their dbs.
        ``slots``: the clauses of the slots the utterance asks about (``search.facts``)."""
        prefix = self.engine.settings.index_prefix
        coverage = params.mode in ("fusion", "two_stage")
        clauses = (
            [*coverage_clauses(words, expansion_share=params.expansion_share), *slots]
            if coverage
            else keyword_clauses(words, EVENT_FIELDS)
        )
        proximity = proximity_clauses(words, params.proximity_share) if coverage else []
        searches: list[Search] = []
        dbs: list[Database] = []
        for db in DATABASES:
            approx = self._approx(db, params)
            args = BodyArgs(self.engine.dialect, db, params, clauses, vector, now, approx)
            ann_filtered = self._ann_filtered(db, params, approx)
            for body in mode_bodies(args, parts, ann_filtered, proximity):
                searches.append((index_alias(prefix, db, "events"), body, ev.routing(db, params)))
                dbs.append(db)
        return searches, dbs

    def rank_events(
        self,
        params: QueryParams,
        dbs: Sequence[Database],
        responses: Sequence[dict[str, Any]],
    ) -> tuple[list[EventResult], list[str]]:
        """``search_events``' answer from the responses to ``event_searches``."""
        prefix = self.engine.settings.index_prefix
        coverage = params.mode in ("fusion", "two_stage")
        mode = params.mode
        offset = ev.vec_offset(params, mode_weights(params))
        ranked: list[tuple[Database, dict[str, Any], float]] = []
        lists: list[list[tuple[Database, dict[str, Any]]]] = []
        missing: list[str] = []
        for db, resp in zip(dbs, responses, strict=True):
            if "error" in resp:
                if "index_not_found" not in str(resp["error"]):
                    raise_engine_error(resp)
                missing.append(db)
                if len(missing) == len(dbs):
                    raise _not_initialised(prefix)
                continue
            hits = resp["hits"]["hits"]
            if mode == "rrf":
                lists.append([(db, h) for h in hits])
            elif mode == "bm25" and ev.native(self.engine.dialect):  # raw BM25 from the engine
                ranked += [(db, h, ev.saturated(float(h["_score"]), params.bm25_k)) for h in hits]
            else:
                ranked += [(db, h, ev.calibrated(float(h["_score"]), offset)) for h in hits]
        if mode == "rrf":  # its score is by rank (fusion.rrf_merge); the threshold holds too
            ranked = [r for r in rrf_merge(lists, params.rrf_k) if r[2] >= params.score_threshold]
        else:
            # By the engine's raw score (one offset for every database): the calibrated score is
            # clamped to [0, 1], and two databases' hits that both clamp at 1 keep their order.
            ranked.sort(key=lambda r: -float(r[1]["_score"]))
            # Rescored scores (approximate path, two-stage) exist only after the engine's
            # min_score has run, so the threshold is applied to what came back.
            ranked = [r for r in ranked if r[2] >= params.score_threshold and r[2] > 0]
        out = []
        nat = ev.native(self.engine.dialect)
        for db, hit, score, gain in anchor.feedback(params, ranked)[: params.limit]:
            signals = None
            if params.explain and mode != "rrf" and "_explanation" in hit:
                lo, span = ev.vec_scale(params)
                w = mode_weights(params)
                native = (w.get("vec", 0.0) / span, w.get("strength", 0.0)) if nat else None
                signals = signals_from_explanation(hit["_explanation"], native)
                if nat and mode == "bm25":  # raw BM25, saturated here (``ev.saturated``)
                    raw = float(hit["_score"])
                    signals = signals.model_copy(
                        update={
                            "kw": round(ev.saturated(raw, params.bm25_k), 4),
                            "bm25": round(raw, 4),
                        }
                    )
                raw_vec = (signals.vec - lo) / span if signals.vec else 0.0
                # as the score holds it: not clamped (only the total score is), so the
                # signals add up to the score and a paraphrase shows above 1
                update = {"vec": round(raw_vec, 4)}
                if coverage and w.get("kw", 0.0) > 0:
                    # coverage is the query's own score (no function): what the raw sum holds
                    # beyond the other signals
                    raw = float(hit["_score"])
                    others = w.get("vec", 0.0) * raw_vec + sum(
                        w.get(k, 0.0) * getattr(signals, k) for k in ("time", "strength")
                    )
                    kw = (raw - offset - others) / w["kw"]
                    # derived from rounded explanation values: good to ~0.005
                    update["kw"] = round(kw, 3) if kw > 0.005 else 0.0
                    update["bm25"] = update["kw"]
                signals = signals.model_copy(update={**update, "anchor": round(gain, 4)})
            out.append((db, hit, score, signals))
        return out, sorted(set(missing))

    def search_entities(
        self, params: QueryParams, words: Sequence[SearchWord], vector: Sequence[float]
    ) -> list[tuple[dict[str, Any], float]]:
        """(hit, score) for the entities of the search's window whose evidence reaches
        ``entity_threshold`` or ``bridge_threshold``, in tier order (docs/SPEC.md §2 step 6),
        best evidence first within a tier, then newest: the bridge's candidates
        (``shown_entities`` picks what the answer shows)."""
        search = self.entity_search(params, words, vector)
        if search is None:
            return []
        return self.score_entities(params, self.engine.msearch([search])[0])

    def entity_search(
        self,
        params: QueryParams,
        words: Sequence[SearchWord],
        vector: Sequence[float],
        slots: Sequence[dict[str, Any]] = (),
    ) -> Search | None:
        """The entity search of a query (both databases' indices, a missing one skipped), or
        None when there is nothing to search. It runs even when no entity is to be shown
        (``entity_limit=0``): the bridge still needs its window."""
        if not words:
            return None
        body = entity_body(params, words, self.engine.dialect, vector, slots)
        if body is None:
            return None
        prefix = self.engine.settings.index_prefix
        indices = ",".join(index_alias(prefix, db, "entities") for db in DATABASES)
        routing = ",".join(ev.routing(db, params) for db in DATABASES)
        return (indices, body, routing, True)

    def score_entities(
        self, params: QueryParams, resp: dict[str, Any]
    ) -> list[tuple[dict[str, Any], float]]:
        """``search_entities``' answer from the response to ``entity_search``."""
        if "error" in resp:
            raise_engine_error(resp)
        offset = entity_offset(params, with_vector=True)
        scored = []
        for hit in resp["hits"]["hits"]:
            score = ev.calibrated(float(hit["_score"]), offset)
            if score >= min(params.entity_threshold, params.bridge_threshold) and score > 0:
                scored.append((hit, score))
        scored.sort(
            key=lambda hs: (
                TIER_OF_KIND[hs[0]["_source"]["kind"]].rank,
                -round(hs[1], 4),
                -instant(hs[0]["_source"].get("updatetime")),
            )
        )
        return scored

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
            # Greetings, acknowledgements, laughter, emoji: nothing to recall, no search.
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
        rewrite = None
        if params.rewrite:
            utterance, rewrite = self._rewrite(utterance, turns)
            clock.lap("rewrite")
        params = apply_calibration(params, self.calibration())
        params, profile = script_params(params, [utterance, *(t.text for t in turns)])
        params, frame, limit = resolve_timeframe(params, utterance, now)  # search.facts
        params = resolve_past(params, utterance)
        slots = slot_clauses(params, utterance)
        (vector, trimmed, parts) = offload(self.text.query_vector, utterance, turns, params)
        clock.lap("embed")
        names = self.names.visible(Scope.of(agent_id=params.agent_id, user_id=params.user_id))
        base, tokens, expanded, words = offload(
            self.text.words, utterance, params, clock, turns, vector, names
        )
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
        event_hits, missing = self.rank_events(params, dbs, responses[: len(searches)])
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
            tokens=tokens,
            base_words=[b.word for b in base],
            expanded_words=[{w: lvl} for w, lvl in expanded],
            mode=params.mode,
            context_words=[w.word for w in words if w.context],
            entity_words=[w.word for w in bridges],
            context_trimmed=trimmed,
            profile=profile,
            rewrite=rewrite,
        )
        reasons = (
            [
                f"the {' and '.join(missing)} events index is missing (run `kemem-es init`): "
                "answered from the others"
            ]
            if missing
            else []
        )
        partial = [
            f for r in (*responses[: len(searches)], *extra_responses) if (f := shard_failure(r))
        ]
        if partial:  # the chat path still answers, but says its answer may be short
            reasons.append(f"a search was partial: {partial[0]}: answered from the rest")
        if reasons:
            info.degraded = True
            info.degraded_reason = "; ".join(reasons)
        return QueryResponse(memory_events=events, memory_entities=entities, additional_info=info)
