"""The query pipeline (SPEC §2): tokenise → base words → expand → embed → events → entities →
assemble, each stage timed in milliseconds."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import numpy as np

from kemem_es.engine.client import Engine
from kemem_es.errors import EngineUnavailable
from kemem_es.models import Database
from kemem_es.prompt import entity_log, event_log
from kemem_es.search import events as ev
from kemem_es.search.clauses import EVENT_FIELDS, SearchWord, keyword_clauses, matched_words
from kemem_es.search.entities import TIER_OF_KIND, entity_body
from kemem_es.search.explain import signals_from_explanation
from kemem_es.search.fusion import rrf_merge
from kemem_es.search.params import QueryParams
from kemem_es.search.response import AdditionalInfo, EntityHit, EventHit, QueryResponse
from kemem_es.store.layout import index_alias
from kemem_es.text import base_words_with_tokens

DATABASES: tuple[Database, ...] = ("user", "official")
# Up to this many memories in scope, every one is scored (exact); measured at 20k in scope on
# 2 cores: exact 13 ms vs approximate 5 ms of engine time.
EXACT_MAX_DOCS = 2_000
COUNT_TTL_S = 60.0
NAMES_TTL_S = 300.0
WORD_CACHE_SIZE = 50_000
CONTEXT_LEVEL = 4  # words from the previous turns weigh like a mid-level association


class Stopwatch:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._start = self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round((now - self._last) * 1000, 3)
        self._last = now

    def total(self) -> dict[str, float]:
        self.timings["total"] = round((time.perf_counter() - self._start) * 1000, 3)
        return self.timings


def _fmt_time(value: str | None) -> str:
    return (value or "").replace("T", " ")[:19]


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
        self._word_tokens: dict[str, tuple[str, ...]] = {}

    def warm_up(self) -> None:
        """Load jieba, the IDF table, the names and the model now, not on the first query."""
        self.learn_names()
        self.words("预热一下", QueryParams(agent_id="-", user_id="-"), Stopwatch())
        self.embedder.embed_one("预热一下")

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
        resp = self.engine.search(indices, body)
        names = {
            b["key"]
            for agg in resp.get("aggregations", {}).values()
            for b in agg["buckets"]
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
    def words(self, text: str, params: QueryParams, clock: Stopwatch) -> tuple[Any, ...]:
        names = [n for n in (params.user_name, params.agent_name) if n]
        self.learn_names()
        self._add_names(names)
        idf = getattr(self.expander, "idf", None)
        base, tokens = base_words_with_tokens(text, params.top_k, names, self.tokenizer, idf)
        ctx = []
        if params.context:
            seen = {b.word for b in base}
            ctx_words = base_words_with_tokens(params.context, 5, names, self.tokenizer, idf)[0]
            ctx = [b for b in ctx_words if b.word not in seen]
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
                skip=names,
            )
            expanded = [(e.word, e.level) for e in result]
        plan = [(b.word, None) for b in base] + [(b.word, CONTEXT_LEVEL) for b in ctx]
        plan += expanded
        words, taken = [], set()
        for word, level in plan:
            if word in taken:
                continue
            taken.add(word)
            # Tokenised once, as the index was: every clause and match check reuses it.
            words.append(SearchWord(word, level, len(word) == 1, self._tokens(word)))
        clock.lap("expand")
        return base, tokens, expanded, words

    def _approx(self, db: Database, params: QueryParams) -> bool:
        """auto: exact scoring while the scope is small, the ANN ∪ keyword window beyond.
        Scope sizes are counted by the engine and cached for a minute."""
        if params.path != "auto":
            return params.path == "approx"
        alias = index_alias(self.engine.settings.index_prefix, db, "events")
        key = f"{alias}|{params.agent_id}|{params.user_id if db == 'user' else ''}|{params.filters}"
        cached = self._counts.get(key)
        if cached is None or time.monotonic() - cached[0] > COUNT_TTL_S:
            scope = {"bool": {"filter": ev.request_filters(db, params)}}
            cached = (time.monotonic(), self.engine.count(alias, scope))
            self._counts[key] = cached
        return cached[1] > EXACT_MAX_DOCS

    def search_events(
        self,
        params: QueryParams,
        words: Sequence[SearchWord],
        vector: Sequence[float],
        now: datetime,
    ) -> list[tuple[Database, dict[str, Any], float, dict[str, float] | None]]:
        """(db, hit, score, signals) best first, after threshold and limit."""
        prefix = self.engine.settings.index_prefix
        clauses = keyword_clauses(words, EVENT_FIELDS)
        mode = params.mode
        searches: list[tuple[str, dict[str, Any]]] = []
        dbs: list[Database] = []
        for db in DATABASES:
            args = (self.engine, db, params, clauses, vector, now, self._approx(db, params))
            for body in _mode_bodies(params, args):
                searches.append((index_alias(prefix, db, "events"), body))
                dbs.append(db)
        responses = self.engine.msearch(searches)
        ranked: list[tuple[Database, dict[str, Any], float]] = []
        lists: list[list[tuple[Database, dict[str, Any]]]] = []
        for db, resp in zip(dbs, responses, strict=True):
            if "error" in resp:
                raise_engine_error(resp)
            hits = resp["hits"]["hits"]
            if mode == "rrf":
                lists.append([(db, h) for h in hits])
            else:
                ranked += [(db, h, float(h["_score"])) for h in hits]
        if mode == "rrf":
            ranked = rrf_merge(lists, params.rrf_k)
        else:
            ranked.sort(key=lambda r: -r[2])
            # Rescored scores (approximate path, two-stage) exist only after the engine's
            # min_score has run, so the threshold is applied to what came back.
            ranked = [r for r in ranked if r[2] >= params.score_threshold]
        out = []
        for db, hit, score in ranked[: params.limit]:
            signals = None
            if params.explain and mode != "rrf" and "_explanation" in hit:
                signals = signals_from_explanation(hit["_explanation"])
            out.append((db, hit, score, signals))
        return out

    def search_entities(
        self, params: QueryParams, words: Sequence[SearchWord]
    ) -> list[dict[str, Any]]:
        """Entity hits in tier order, newest first within a tier."""
        if params.entity_limit == 0 or not words:
            return []
        body = entity_body(params, words)
        if body is None:
            return []
        prefix = self.engine.settings.index_prefix
        indices = ",".join(index_alias(prefix, db, "entities") for db in DATABASES)
        return list(self.engine.search(indices, body)["hits"]["hits"])

    # -- the whole pipeline ----------------------------------------------------------------
    def query(self, text: str, params: QueryParams) -> QueryResponse:
        clock = Stopwatch()
        now = params.now or datetime.now()
        base, tokens, expanded, words = self.words(text, params, clock)
        # Five decimals keep cosines exact to ~1e-5 and halve the JSON the request carries.
        vector = np.round(self.embedder.embed_one(text).astype(float), 5).tolist()
        clock.lap("embed")
        event_hits = self.search_events(params, words, vector, now)
        clock.lap("search_events")
        entity_hits = self.search_entities(params, words)
        clock.lap("search_entities")
        events = [
            self._event_hit(i, db, hit, score, signals, now)
            for i, (db, hit, score, signals) in enumerate(event_hits)
        ]
        entities = [self._entity_hit(i, hit, words) for i, hit in enumerate(entity_hits)]
        clock.lap("assemble")
        info = AdditionalInfo(
            timings_ms=clock.total(),
            query=text,
            tokens=tokens,
            base_words=[b.word for b in base],
            expanded_words=[{w: lvl} for w, lvl in expanded],
            mode=params.mode,
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

    def _entity_hit(self, i: int, hit: dict, words: Sequence[SearchWord]) -> EntityHit:
        src = hit["_source"]
        tier = TIER_OF_KIND[src["kind"]]
        matched = matched_words(src, words, list(tier.fields))
        matched_set = set(matched)
        weight = sum(w.boost for w in words if w.word in matched_set)
        out = EntityHit(
            id=i,
            kind=src.get("kind", ""),
            score=round(weight / (weight + 1.0), 4),  # 1 base word → 0.5
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


def _mode_bodies(params: QueryParams, args: tuple) -> list[dict[str, Any]]:
    """The event search bodies of one database for the chosen mode (rrf: one list per signal)."""
    threshold = params.score_threshold
    if params.mode == "fusion":
        return [ev.event_body(*args, min_score=threshold)]
    if params.mode == "bm25":
        kw_only = {"kw": 1.0}
        return [ev.event_body(*args, weights=kw_only, min_score=threshold, require_keyword=True)]
    if params.mode == "vector":
        return [ev.event_body(*args, weights={"vec": 1.0}, min_score=threshold)]
    if params.mode == "two_stage":
        return [ev.two_stage_body(*args)]
    window = max(params.limit * 4, 20)
    return [
        ev.event_body(*args, weights={"kw": 1.0}, size=window, require_keyword=True),
        ev.event_body(*args, weights={"vec": 1.0}, size=window),
    ]


def raise_engine_error(resp: dict[str, Any]) -> None:
    err = resp.get("error", {})
    reason = err.get("root_cause", [{}])[0].get("reason") if isinstance(err, dict) else err
    raise EngineUnavailable(f"search failed: {reason or err}")
