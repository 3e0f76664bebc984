"""The query pipeline (SPEC §2): tokenise → base words → expand → embed → events → entities →
assemble, each stage timed in milliseconds."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from kemem_es.engine.bridge import offload
from kemem_es.engine.client import Engine, Search
from kemem_es.errors import EngineUnavailable
from kemem_es.models import Database
from kemem_es.prompt import entity_log, event_log
from kemem_es.search import events as ev
from kemem_es.search.clauses import (
    EVENT_FIELDS,
    SearchWord,
    coverage_clauses,
    keyword_clauses,
    matched_words,
)
from kemem_es.search.entities import TIER_OF_KIND, entity_body, entity_offset
from kemem_es.search.explain import signals_from_explanation
from kemem_es.search.fusion import rrf_merge
from kemem_es.search.params import QueryParams, script_params
from kemem_es.search.response import (
    AdditionalInfo,
    EntityHit,
    EventHit,
    QueryResponse,
    Signals,
)
from kemem_es.store.layout import index_alias
from kemem_es.text import base_words_with_tokens, normalize
from kemem_es.text.dialogue import (
    Turn,
    context_turns,
    dialogue_window,
    is_small_talk,
    keep_end,
    sentences,
    split_label,
)

DATABASES: tuple[Database, ...] = ("user", "official")
# Up to this many memories in scope, every one is scored (exact); measured at 20k in scope on
# 2 cores: exact 13 ms vs approximate 5 ms of engine time.
EXACT_MAX_DOCS = 2_000
COUNT_TTL_S = 60.0
NAMES_TTL_S = 300.0
WORD_CACHE_SIZE = 50_000
CONTEXT_LEVEL = 4  # bm25 mode: words from the previous turns weigh like a mid-level association
CONTEXT_WORDS_PER_TURN = 5
MAX_BRIDGES = 2
ENTITY_TEXT_FIELDS = [
    "keyword",
    "keyword_tok",
    "entity_name",
    "entity_name_tok",
    "description_tok",
]
# The model reads at most 256 tokens (about one per Han character): the dialogue window keeps
# the newest turns within EMBED_MAX_TOKENS of them (counted by the embedder's tokenizer, or as
# characters for an embedder that cannot count) instead of letting the tokenizer cut the end.
# An utterance longer than EMBED_MAX_CHARS keeps its end.
EMBED_MAX_CHARS = 250
EMBED_MAX_TOKENS = 250

# an event answer: (database, engine hit, calibrated score, signals when explained)
EventResult = tuple[Database, dict[str, Any], float, Signals | None]


class Stopwatch:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._start = self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        # a stage met twice (a second event search) adds up
        self.timings[stage] = round(self.timings.get(stage, 0.0) + (now - self._last) * 1000, 3)
        self._last = now

    def total(self) -> dict[str, float]:
        self.timings["total"] = round((time.perf_counter() - self._start) * 1000, 3)
        return self.timings


def _ts(value: str | None) -> float:
    """An ISO-ish time as a sortable number (0 when missing)."""
    if not value:
        return 0.0
    try:
        return datetime.fromisoformat(value.replace(" ", "T")[:19]).timestamp()
    except ValueError:
        return 0.0


def _fmt_time(value: str | None) -> str:
    return (value or "").replace("T", " ")[:19]


def _missing_index(err: BaseException) -> bool:
    """Both clients raise a NotFoundError (HTTP 404) for a missing index."""
    return type(err).__name__ == "NotFoundError" or "index_not_found" in str(err)


def _not_initialised(prefix: str) -> EngineUnavailable:
    return EngineUnavailable(
        f"no memory indices under prefix {prefix!r}: run `kemem-es init` (or Kemem.init()) first"
    )


class Searcher:
    """Holds the long-lived parts (engine client, model, tokenizer, lexicon) across queries."""

    def __init__(self, engine: Engine, embedder: Any, tokenizer: Any, expander: Any) -> None:
        self.engine = engine
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.expander = expander
        self._counts: dict[str, tuple[float, int]] = {}
        self._names_loaded_at = -NAMES_TTL_S
        self._known_names: set[str] = set()
        self._person_names: set[str] = set()  # user and agent names: never search words
        self._word_tokens: dict[str, tuple[str, ...]] = {}
        self._word_vectors: dict[str, np.ndarray] = {}

    def warm_up(self) -> None:
        """Load jieba, the IDF table, the names and the model now, not on the first query."""
        self.learn_names()
        self.words("预热一下", QueryParams(agent_id="-", user_id="-"), Stopwatch())
        self.embedder.embed_one("预热一下")
        # One whole query on a scope that holds nothing: both searches' code paths, the
        # engine's scripts and the scope counts' cache warmed before the first user's query.
        with contextlib.suppress(Exception):  # a warm-up never fails the searcher
            self.query("预热一下", QueryParams(agent_id="-", user_id="-", path="approx"))

    def learn_names(self) -> None:
        """Indexed user/agent/entity names become jieba words, as they were at index time."""
        if time.monotonic() - self._names_loaded_at < NAMES_TTL_S:
            return
        self._names_loaded_at = time.monotonic()
        prefix = self.engine.settings.index_prefix
        indices = ",".join(
            index_alias(prefix, db, kind) for db in DATABASES for kind in ("events", "entities")
        )
        aggs = {
            f: {"terms": {"field": f, "size": 10_000}}
            for f in ("user_name", "agent_name", "entity_name")
        }
        body = {
            "size": 0,
            "query": {"bool": {"must_not": [{"term": {"entity_type": "泛化实体"}}]}},
            "aggs": aggs,
        }
        resp = self.engine.search(indices, body, ignore_unavailable=True)
        if not resp.get("_shards", {}).get("total"):  # nothing indexed yet: ask again next time
            self._names_loaded_at = -NAMES_TTL_S
        aggs = resp.get("aggregations", {})
        names = {
            b["key"] for agg in aggs.values() for b in agg["buckets"] if 1 < len(b["key"]) <= 12
        }
        self._person_names = {
            b["key"].lower()
            for f in ("user_name", "agent_name")
            for b in aggs.get(f, {}).get("buckets", [])
            if 1 < len(b["key"]) <= 12
        }
        self._add_names(names)

    def _add_names(self, names: set[str] | list[str]) -> None:
        new = set(names) - self._known_names
        if new:
            self.tokenizer.add_words(sorted(new))
            self._known_names |= new
            self._word_tokens.clear()  # a new dictionary word can change how words split

    def _tokens(self, word: str) -> tuple[str, ...]:
        """A search word's tokens, as the index has them; lexicon words recur, so cached."""
        toks = self._word_tokens.get(word)
        if toks is None:
            toks = tuple(t.lower() for t in self.tokenizer.tokenize(word))
            if len(self._word_tokens) >= WORD_CACHE_SIZE:
                self._word_tokens.clear()
            self._word_tokens[word] = toks
        return toks

    # -- stages ----------------------------------------------------------------------------
    def _vectors(self, words: Sequence[str]) -> np.ndarray:
        """Embeddings of lexicon words, cached (the same associations recur across queries)."""
        missing = [w for w in dict.fromkeys(words) if w not in self._word_vectors]
        if missing:
            if len(self._word_vectors) + len(missing) > WORD_CACHE_SIZE:
                self._word_vectors.clear()
            for w, v in zip(missing, self.embedder.embed(missing), strict=True):
                self._word_vectors[w] = np.asarray(v, dtype=np.float32)
        return np.stack([self._word_vectors[w] for w in words])

    def prune_expansions(
        self, expanded: list[tuple[str, int]], vector: Sequence[float], params: QueryParams
    ) -> list[tuple[str, int]]:
        """Meaning-aware pruning (SPEC §3's weakness: words expanded independently of the
        sentence): the lexicon's candidates are ranked by level, the best ``expand_candidates``
        are embedded (cached per word) and only those whose cosine to the query vector reaches
        ``expand_min_cos`` are kept — 吃火锅 keeps 火锅/麻辣烫, drops 狗肉/熏肉 unless the
        sentence is about them."""
        if not expanded or params.expand_min_cos <= -1.0:
            return expanded
        head = expanded[: params.expand_candidates]
        sims = self._vectors([w for w, _ in head]) @ np.asarray(vector, dtype=np.float32)
        return [e for e, c in zip(head, sims, strict=True) if c >= params.expand_min_cos]

    def words(
        self,
        text: str,
        params: QueryParams,
        clock: Stopwatch,
        turns: Sequence[Turn] = (),
        vector: Sequence[float] | None = None,
    ) -> tuple[Any, ...]:
        """Base words of the utterance (TF-IDF, weight = TF-IDF), context words (each earlier
        turn's top words, weight × ``context_decay`` per turn back), their sub-words, then the
        expansions of the utterance's base words. Names — the caller's, every indexed user and
        agent name, speaker labels — are never search words (``learn_names`` first)."""
        labels = [t.speaker for t in turns if t.speaker]
        names = [n for n in (params.user_name, params.agent_name) if n]
        self._add_names(names + [lb for lb in labels if len(lb) > 1])
        exclude = set(names) | set(labels) | self._person_names
        idf = getattr(self.expander, "idf", None)
        base, tokens = base_words_with_tokens(text, params.top_k, exclude, self.tokenizer, idf)
        seen = {b.word for b in base}
        ctx: list[tuple[Any, float]] = []
        weight = 1.0
        for turn in turns:  # newest first
            weight *= params.context_decay
            if weight <= 0:
                break
            picked = base_words_with_tokens(
                turn.text, CONTEXT_WORDS_PER_TURN, exclude, self.tokenizer, idf
            )[0]
            for b in picked:
                if b.word not in seen:
                    seen.add(b.word)
                    ctx.append((b, weight))
        clock.lap("tokenise")
        expanded: list[tuple[str, int]] = []
        # Expansion policy: one-character base words still search (keyword fields only) but
        # are not expanded; their associations (吃 → 好吃, 嘴馋) are mostly noise.
        targets = [b.word for b in base if not b.single_char]
        if params.expand and params.max_words > 0 and targets:
            result = self.expander.expand_words(
                targets,
                max_words=params.max_words,
                strategy=params.strategy,
                filter_levels=params.filter_levels,
                skip=sorted(exclude),
            )
            expanded = [(e.word, e.level) for e in result]
            if vector is not None:
                expanded = self.prune_expansions(expanded, vector, params)
        words, taken = [], set()

        def add(word: str, level: int | None, weight: float, context: bool = False) -> None:
            if word in taken:
                return
            taken.add(word)
            toks = self._tokens(word)  # tokenised once, as the index was
            subs = tuple(self.tokenizer.subwords(toks[0])) if len(toks) == 1 else ()
            words.append(SearchWord(word, level, len(word) == 1, toks, weight, subs, context))

        for b in base:
            add(b.word, None, b.weight)
        for b, w in ctx:
            add(b.word, CONTEXT_LEVEL, b.weight * w, context=True)
        for word, level in expanded:
            add(word, level, 0.0)
        clock.lap("expand")
        return base, tokens, expanded, words

    def query_vector(
        self, text: str, turns: Sequence[Turn], params: QueryParams
    ) -> tuple[list[float], bool, list[list[float]]]:
        """The utterance's vector, blended with the dialogue window's (the newest turns that
        fit the model, oldest first) when there is context: w·u + (1−w)·d, renormalised.
        Returns the vector, whether the window had to drop older turns, and the vectors of the
        utterance's sentences when it has several (blended with the window the same way)."""
        utterance = keep_end(text, EMBED_MAX_CHARS)
        pieces = sentences(utterance, params.max_sentences) if params.sentence_weight > 0 else []
        parts = self.embedder.embed(pieces).astype(float) if pieces else np.zeros((0, 1))
        if not turns or params.utterance_weight >= 1.0:
            vec = self.embedder.embed_one(utterance).astype(float)
            return _rounded(vec), len(text) > EMBED_MAX_CHARS, [_rounded(p) for p in parts]
        window, cut = dialogue_window(text, list(turns), EMBED_MAX_TOKENS, self._length)
        u, d = self.embedder.embed([utterance, window]).astype(float)
        w = params.utterance_weight
        return _rounded(_blend(u, d, w)), cut, [_rounded(_blend(p, d, w)) for p in parts]

    def _length(self, text: str) -> int:
        """A text's share of the model's input: its tokens (English words take one to four
        each, so 250 characters held a third of what the model reads), else its characters."""
        count = getattr(self.embedder, "count_tokens", None)
        return count([text])[0] if count is not None else len(text)

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
        key = f"{alias}|{params.agent_id}|{params.user_id if db == 'user' else ''}|{params.filters}"
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
    ) -> tuple[list[Search], list[Database]]:
        """The event searches of a query (one or two per database, by mode) and their dbs."""
        prefix = self.engine.settings.index_prefix
        coverage = params.mode in ("fusion", "two_stage")
        clauses = (
            coverage_clauses(words, expansion_share=params.expansion_share)
            if coverage
            else keyword_clauses(words, EVENT_FIELDS)
        )
        searches: list[Search] = []
        dbs: list[Database] = []
        for db in DATABASES:
            approx = self._approx(db, params)
            args = (self.engine, db, params, clauses, vector, now, approx)
            ann_filtered = self._ann_filtered(db, params, approx)
            for body in _mode_bodies(params, args, parts, ann_filtered):
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
        offset = ev.vec_offset(params, _mode_weights(params))
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
            else:
                ranked += [(db, h, ev.calibrated(float(h["_score"]), offset)) for h in hits]
        if mode == "rrf":
            ranked = rrf_merge(lists, params.rrf_k)
        else:
            # By the engine's raw score (one offset for every database): the calibrated score is
            # clamped to [0, 1], and two databases' hits that both clamp at 1 keep their order.
            ranked.sort(key=lambda r: -float(r[1]["_score"]))
            # Rescored scores (approximate path, two-stage) exist only after the engine's
            # min_score has run, so the threshold is applied to what came back.
            ranked = [r for r in ranked if r[2] >= params.score_threshold and r[2] > 0]
        out = []
        for db, hit, score in ranked[: params.limit]:
            signals = None
            if params.explain and mode != "rrf" and "_explanation" in hit:
                signals = signals_from_explanation(hit["_explanation"])
                lo, span = ev.vec_scale(params)
                raw_vec = (signals.vec - lo) / span if signals.vec else 0.0
                update = {"vec": round(min(max(raw_vec, 0.0), 1.0), 4)}
                w = _mode_weights(params)
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
                signals = signals.model_copy(update=update)
            out.append((db, hit, score, signals))
        return out, sorted(set(missing))

    def search_entities(
        self, params: QueryParams, words: Sequence[SearchWord], vector: Sequence[float]
    ) -> list[tuple[dict[str, Any], float]]:
        """(hit, score) for entities whose evidence reaches ``entity_threshold``, in tier order
        (SPEC §2 step 6), best evidence first within a tier, then newest; at most
        ``entity_limit`` (default: ``limit``)."""
        search = self.entity_search(params, words, vector)
        if search is None:
            return []
        return self.score_entities(params, self.engine.msearch([search])[0])

    def entity_search(
        self, params: QueryParams, words: Sequence[SearchWord], vector: Sequence[float]
    ) -> Search | None:
        """The entity search of a query (both databases' indices, a missing one skipped), or
        None when there is nothing to search."""
        limit = params.entity_limit if params.entity_limit is not None else params.limit
        if limit == 0 or not words:
            return None
        body = entity_body(params, words, self.engine, vector)
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
                -_ts(hs[0]["_source"].get("updatetime")),
            )
        )
        return scored

    def bridge_words(
        self,
        params: QueryParams,
        words: list[SearchWord],
        entities: Sequence[tuple[dict[str, Any], float]],
    ) -> list[SearchWord]:
        """Names of the concrete entities the utterance is about become search words for the
        events: "我那只狗" is about 豆包 when the user's entity memories say 豆包 is her corgi,
        and her events say 豆包, not 狗. Only strong evidence of meaning bridges (score ≥
        ``bridge_threshold`` with no word in common), at most ``MAX_BRIDGES`` names, weighted
        like the utterance's strongest word; names the query already has and the user's and
        agent's own names are left out."""
        if params.bridge_threshold >= 1.0:
            return []
        taken = {w.word for w in words} | self._person_names
        top = max((w.weight for w in words if w.level is None), default=1.0)
        out: list[SearchWord] = []
        for hit, score in sorted(entities, key=lambda hs: -hs[1]):
            src = hit["_source"]
            name = normalize(src.get("entity_name") or "").strip()
            if (
                score < params.bridge_threshold
                or src.get("entity_type") != "具体实体"
                or src.get("kind") == "记忆画面"
                or len(name) < 2
                or name in taken
                # only what the utterance means without saying it: an entity that shares a
                # word with the query is already found through that word
                or matched_words(src, words, ENTITY_TEXT_FIELDS)
            ):
                continue
            taken.add(name)
            toks = self._tokens(name)
            out.append(SearchWord(name, CONTEXT_LEVEL, False, toks, top, (), context=True))
            if len(out) >= MAX_BRIDGES:
                break
        return out

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
        utterance = split_label(text).text if text.strip() else text
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
        turns = context_turns(params.context, params.context_turns)
        params, profile = script_params(params, [utterance, *(t.text for t in turns)])
        vector, trimmed, parts = offload(self.query_vector, utterance, turns, params)
        clock.lap("embed")
        self.learn_names()  # may search the engine: not inside the offloaded CPU stage
        base, tokens, expanded, words = offload(self.words, utterance, params, clock, turns, vector)
        # Entities and events in one round trip, which the engine serves in parallel. The
        # entities can lend the events bridge words (``bridge_words``); only then, a few
        # queries in a hundred, is the event search sent again with them.
        searches, dbs = self.event_searches(params, words, vector, now, parts)
        entity_search = self.entity_search(params, words, vector)
        extra = [entity_search] if entity_search is not None else []
        responses = self.engine.msearch([*searches, *extra])
        clock.lap("search_events")
        scored_entities = self.score_entities(params, responses[-1]) if extra else []
        bridges = self.bridge_words(params, words, scored_entities)
        limit = params.entity_limit if params.entity_limit is not None else params.limit
        entity_hits = [h for h in scored_entities if h[1] >= params.entity_threshold][:limit]
        clock.lap("search_entities")
        if bridges:
            searches, dbs = self.event_searches(params, [*words, *bridges], vector, now, parts)
            responses = self.engine.msearch(searches)
        event_hits, missing = self.rank_events(params, dbs, responses[: len(searches)])
        clock.lap("search_events")
        events = [
            self._event_hit(i, db, hit, score, signals, now)
            for i, (db, hit, score, signals) in enumerate(event_hits)
        ]
        entities = [
            self._entity_hit(i, hit, score, words) for i, (hit, score) in enumerate(entity_hits)
        ]
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
        )
        if missing:
            info.degraded = True
            info.degraded_reason = (
                f"the {' and '.join(missing)} events index is missing (run `kemem-es init`): "
                "answered from the others"
            )
        return QueryResponse(memory_events=events, memory_entities=entities, additional_info=info)

    @staticmethod
    def _event_hit(
        i: int, db: str, hit: dict, score: float, signals: Any, now: datetime
    ) -> EventHit:
        src = hit["_source"]
        out = EventHit(
            id=i,
            score=round(score, 4),
            index=str(src.get("id", hit["_id"])),
            db=db,
            description=src.get("description", ""),
            deepinsight=src.get("deepinsight", ""),
            updatetime=_fmt_time(src.get("updatetime")),
            created_at=_fmt_time(src.get("created_at")),
            place=src.get("place", ""),
            scene=src.get("scene", ""),
            keyword=src.get("keywords", []),
            signals=signals,
        )
        out.log = event_log(out, now)
        return out

    def _entity_hit(
        self, i: int, hit: dict, score: float, words: Sequence[SearchWord]
    ) -> EntityHit:
        src = hit["_source"]
        tier = TIER_OF_KIND[src["kind"]]
        fields = [*tier.fields, "description_tok"]
        matched = matched_words(src, words, list(dict.fromkeys(fields)))
        out = EntityHit(
            id=i,
            kind=src.get("kind", ""),
            score=round(score, 4),
            index={"index": str(src.get("id", hit["_id"]))},
            db=src.get("db", "user"),
            entity_name=src.get("entity_name", ""),
            entity_type=src.get("entity_type", ""),
            description=src.get("description", ""),
            updatetime=_fmt_time(src.get("updatetime")),
            matched_keywords=matched,
            keyword=src.get("keyword", ""),
            tier=tier.rank,
        )
        out.log = entity_log(out)
        return out


def _blend(u: np.ndarray, d: np.ndarray, w: float) -> np.ndarray:
    vec = w * u + (1.0 - w) * d
    return vec / max(float(np.linalg.norm(vec)), 1e-12)


def _rounded(vec: np.ndarray) -> list[float]:
    """Five decimals keep cosines exact to ~1e-5 and halve the JSON the request carries."""
    return np.round(vec, 5).tolist()


def _mode_weights(params: QueryParams) -> dict[str, float]:
    """The signal weights a mode's scores are made of."""
    if params.mode == "bm25":
        return {"kw": 1.0}
    if params.mode == "vector":
        return {"vec": 1.0}
    return params.weights.model_dump()


def _mode_bodies(
    params: QueryParams,
    args: tuple,
    parts: Sequence[Sequence[float]] = (),
    ann_filtered: bool = True,
) -> list[dict[str, Any]]:
    """The event search bodies of one database for the chosen mode (rrf: one list per signal).
    fusion and two_stage score keyword coverage; bm25 and rrf keep BM25 (saturated). Every
    mode with a vector term gets the sentence vectors (``parts``)."""
    threshold = params.score_threshold
    if params.mode == "fusion":
        return [ev.event_body(*args, min_score=threshold, parts=parts, ann_filtered=ann_filtered)]
    if params.mode == "bm25":
        kw_only = {"kw": 1.0}
        return [
            ev.event_body(
                *args, weights=kw_only, min_score=threshold, require_keyword=True, coverage=False
            )
        ]
    if params.mode == "vector":
        return [
            ev.event_body(
                *args,
                weights={"vec": 1.0},
                min_score=threshold,
                parts=parts,
                ann_filtered=ann_filtered,
            )
        ]
    if params.mode == "two_stage":
        return [ev.two_stage_body(*args, parts=parts)]
    window = max(params.limit * 4, 20)
    return [
        ev.event_body(
            *args, weights={"kw": 1.0}, size=window, require_keyword=True, coverage=False
        ),
        ev.event_body(
            *args, weights={"vec": 1.0}, size=window, parts=parts, ann_filtered=ann_filtered
        ),
    ]


def raise_engine_error(resp: dict[str, Any]) -> None:
    err = resp.get("error", {})
    if "index_not_found" in str(err):
        raise EngineUnavailable(f"search failed: an index is missing ({_reason(err)}): run init")
    reason = err.get("root_cause", [{}])[0].get("reason") if isinstance(err, dict) else err
    raise EngineUnavailable(f"search failed: {reason or err}")


def _reason(err: Any) -> str:
    if isinstance(err, dict):
        return str(err.get("root_cause", [{}])[0].get("reason") or err.get("type") or err)
    return str(err)
