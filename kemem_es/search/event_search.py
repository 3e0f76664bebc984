"""The event searches of a query (one or two per database, by mode) and their ranked answer:
threshold, limit, calibrated scores and, when explained, the signals."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from kemem_es.contract.params import QueryParams
from kemem_es.engine.client import Search
from kemem_es.engine.errors import raise_engine_error
from kemem_es.models import Database
from kemem_es.search import anchor, best_sentence, topic_shift
from kemem_es.search import events as ev
from kemem_es.search.calibration import mode_weights
from kemem_es.search.clauses import (
    EVENT_FIELDS,
    SearchWord,
    coverage_clauses,
    coverage_parts,
    keyword_clauses,
    proximity_clauses,
)
from kemem_es.search.explain import signals_from_explanation
from kemem_es.search.fusion import rrf_merge
from kemem_es.search.modes import BodyArgs, mode_bodies
from kemem_es.search.scope_size import ScopeSizes
from kemem_es.search.searcher_base import EventResult, _not_initialised
from kemem_es.store.layout import DATABASES, index_alias


class EventSearch(ScopeSizes):
    """The event searches of a query and their ranked answer."""

    def search_events(
        self,
        params: QueryParams,
        words: Sequence[SearchWord],
        vector: Sequence[float],
        now: datetime,
        parts: Sequence[Sequence[float]] = (),
        utterance: Sequence[float] | None = None,
    ) -> tuple[list[EventResult], list[str]]:
        """(db, hit, score, signals) best first, after threshold and limit; scores calibrated.
        Also the databases whose events index is missing: the others still answer (a missing
        official index must not cost the user's own memories); all missing is an error.
        ``utterance``: the utterance's own vector (``topic_shift``), when it has context."""
        searches, dbs = self.event_searches(params, words, vector, now, parts)
        responses = self.engine.msearch(searches)
        return self.rank_events(params, dbs, responses, utterance, vector)

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
        earlier: list[dict[str, Any]] = []
        if params.mode == "fusion":
            clauses, earlier = coverage_parts(words, expansion_share=params.expansion_share)
            clauses = [*clauses, *slots]
            if topic_shift.applies(params, words):  # hits say which earlier words they hold
                earlier = topic_shift.named(earlier)
        elif coverage:
            clauses = [*coverage_clauses(words, expansion_share=params.expansion_share), *slots]
        else:
            clauses = keyword_clauses(words, EVENT_FIELDS)
        proximity = proximity_clauses(words, params.proximity_share) if coverage else []
        searches: list[Search] = []
        dbs: list[Database] = []
        for db in DATABASES:
            approx = self._approx(db, params)
            args = BodyArgs(self.engine.dialect, db, params, clauses, vector, now, approx)
            ann_filtered = self._ann_filtered(db, params, approx)
            for body in mode_bodies(args, parts, ann_filtered, proximity, earlier):
                searches.append((index_alias(prefix, db, "events"), body, ev.routing(db, params)))
                dbs.append(db)
        return searches, dbs

    def rank_events(
        self,
        params: QueryParams,
        dbs: Sequence[Database],
        responses: Sequence[dict[str, Any]],
        utterance: Sequence[float] | None = None,
        vector: Sequence[float] | None = None,
    ) -> tuple[list[EventResult], list[str]]:
        """``search_events``' answer from the responses to ``event_searches`` (``vector``: the
        query's, for the memories' best sentences, search.best_sentence)."""
        prefix = self.engine.settings.index_prefix
        coverage = params.mode in ("fusion", "two_stage")
        mode = params.mode
        offset = ev.vec_offset(params, mode_weights(params))
        ranked: list[tuple[Database, dict[str, Any], float]] = []
        # fusion, words first (modes.words_first): a database's second body is the fill
        fill: list[tuple[Database, dict[str, Any], float]] = []
        lists: list[list[tuple[Database, dict[str, Any]]]] = []
        missing: list[str] = []
        seen: set[Database] = set()
        for db, resp in zip(dbs, responses, strict=True):
            filling = mode == "fusion" and db in seen
            seen.add(db)
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
                found = [(db, h, ev.calibrated(float(h["_score"]), offset)) for h in hits]
                (fill if filling else ranked).extend(found)
        if mode == "rrf":  # its score is by rank (fusion.rrf_merge); the threshold holds too
            ranked = [r for r in rrf_merge(lists, params.rrf_k) if r[2] >= params.score_threshold]
            fed = anchor.feedback(params, ranked)
        else:
            ranked = best_sentence.lifted(params, _by_score(ranked), vector, offset)
            ranked = topic_shift.gated(
                params, ranked, utterance, mode_weights(params).get("kw", 0.0), offset
            )
            fill = best_sentence.lifted(params, _by_score(fill), vector, offset)
            ranked, fill = _kept(params, ranked), _kept(params, fill)
            # the memories a word matches first (anchor feedback among them), then the fill:
            # those no word matches, by their score
            have = {_key(r[1]) for r in ranked}
            fed = anchor.feedback(params, ranked) if ranked else []
            rest = [r for r in fill if _key(r[1]) not in have]
            fed += anchor.feedback(params, rest) if not fed else [(*r, 0.0) for r in rest]
        out = []
        nat = ev.native(self.engine.dialect)
        for db, hit, score, gain in fed[: params.limit]:
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
                    raw = float(hit["_score"]) - hit.get(best_sentence.GAIN, 0.0)
                    others = w.get("vec", 0.0) * raw_vec + sum(
                        w.get(k, 0.0) * getattr(signals, k) for k in ("time", "strength")
                    )
                    kw = (raw - offset - others) / w["kw"]
                    # derived from rounded explanation values: good to ~0.005
                    update["kw"] = round(kw, 3) if kw > 0.005 else 0.0
                    update["bm25"] = update["kw"]
                sentence = round(hit.get(best_sentence.GAIN, 0.0), 4)
                update |= {"anchor": round(gain, 4), "sentence": sentence}
                signals = signals.model_copy(update=update)
            out.append((db, hit, score, signals))
        return out, sorted(set(missing))


def _key(hit: dict[str, Any]) -> str:
    return f"{hit.get('_index')}/{hit['_id']}"


def _kept(
    params: QueryParams, ranked: list[tuple[Database, dict[str, Any], float]]
) -> list[tuple[Database, dict[str, Any], float]]:
    """Best first and over the threshold. By the engine's raw score (one offset for every
    database): the calibrated score is clamped to [0, 1], and two databases' hits that both
    clamp at 1 keep their order. Rescored scores (approximate path, two-stage) exist only after
    the engine's min_score has run, so the threshold is applied to what came back."""
    return [r for r in _by_score(ranked) if r[2] >= params.score_threshold and r[2] > 0]


def _by_score(
    ranked: list[tuple[Database, dict[str, Any], float]],
) -> list[tuple[Database, dict[str, Any], float]]:
    return sorted(ranked, key=lambda r: -float(r[1]["_score"]))
