"""Round 7, offline: weigh each query word's share of the keyword coverage by how rare it is
*in the user's own memories* (a scope IDF), so that a word half the scope contains counts less.

    PYTHONPATH=. python bench/results/2026-11-26-quality/round7/scope_idf.py dump
    PYTHONPATH=. python bench/results/2026-11-26-quality/round7/scope_idf.py eval

``dump`` runs the package's query pipeline on the Chinese dialogue sets against the kept
``bench-q6-zh`` store (``bench.dialogue_eval --keep``), reads every memory in scope and records,
per weighted search word, the coverage factor each memory earns (best field, sub-words at 0.7),
as ``clauses.coverage_clauses`` has the engine compute it; it checks that the recombined coverage
equals the engine's. ``eval`` reweighs the shares and ranks with the fused score.
"""

from __future__ import annotations

import pickle
import sys
from datetime import datetime
from typing import Any

import numpy as np

from bench.common import WORK
from bench.evalset import metrics

DUMP = WORK / "scope-idf-dialogue.pkl"


def match_factor(doc: dict[str, Any], word: Any) -> float:
    from kemem_es.search.clauses import (
        COVERAGE_FIELDS,
        EXACT_FIELDS,
        KEYWORD_ONLY_FIELDS,
        SUBWORD_FACTOR,
        _contains,
    )

    best = 0.0
    for field, factor in COVERAGE_FIELDS.items():
        if word.single_char and field not in KEYWORD_ONLY_FIELDS:
            continue
        value = doc.get(field)
        if field in EXACT_FIELDS:
            values = value if isinstance(value, list) else [value] if value else []
            best = max(best, factor) if word.word in values else best
            continue
        toks = str(value or "").split()
        if word.toks and _contains(toks, list(word.toks)):
            best = max(best, factor)
        elif word.subwords and not word.single_char and set(word.subwords) & set(toks):
            best = max(best, factor * SUBWORD_FACTOR)
    return best


def query_plan(s: Any, q: dict[str, Any]) -> tuple[Any, list[float], list, list]:
    """A dialogue query's parameters, vector, sentence vectors and search words (bridges
    included), as the package's pipeline makes them."""
    from bench.dialogue_eval import query_text
    from kemem_es.contract.params import QueryParams
    from kemem_es.search.stopwatch import Stopwatch
    from kemem_es.text.dialogue import context_turns, split_label

    text, context = query_text(q)
    p = QueryParams(
        user_id=q["user_id"],
        agent_id=q["agent_id"],
        context=context,
        now=datetime.fromisoformat(q["now"]),
    )
    utterance = split_label(text).text
    turns = context_turns(p.context, p.context_turns)
    vector, _, parts = s.text.query_vector(utterance, turns, p)
    s.learn_names()
    words = s.text.words(utterance, p, Stopwatch(), turns, vector)[3]
    words = [*words, *s.text.bridge_words(p, words, s.search_entities(p, words, vector))]
    return p, vector, parts, words


def dump() -> None:
    from bench.common import make_kemem
    from bench.dialogue_eval import load_queries, qrels
    from kemem_es.contract.params import QueryParams
    from kemem_es.search import events as ev
    from kemem_es.search.clauses import COVERAGE_FIELDS, coverage_clauses
    from kemem_es.store.layout import DATABASES, index_alias

    s = make_kemem("bench-q6-zh").searcher
    gold = qrels("zh")

    def search(db: str, p: QueryParams, clauses: list, fields: list[str]) -> list[dict]:
        alias = index_alias(s.engine.settings.index_prefix, db, "events")
        body = {"size": 10_000, "query": ev.candidate_query(db, p, clauses), "_source": fields}
        return s.engine.search(alias, body, ignore_unavailable=True)["hits"]["hits"]

    out = []
    for q in load_queries(corpus="zh"):
        p, vector, parts, words = query_plan(s, q)
        weighted = [w for w in words if w.weighted and w.weight > 0]
        fields = ["id", "event_time", "strength", "vector", *COVERAGE_FIELDS]
        docs = [h["_source"] for db in DATABASES for h in search(db, p, [], fields)]
        cov_clauses = coverage_clauses(words, expansion_share=p.expansion_share)
        engine = {
            h["_source"]["id"]: min(h["_score"], 1.0)
            for db in DATABASES
            for h in search(db, p, cov_clauses, ["id"])
        }
        V = np.asarray([d["vector"] for d in docs], dtype=np.float32)
        P = np.asarray(parts)
        age = [(p.now - datetime.fromisoformat(d["event_time"][:19])).days for d in docs]
        out.append(
            {
                "qid": q["qid"],
                "style": q["style"],
                "gold": gold[q["qid"]],
                "ids": [d["id"] for d in docs],
                "weights": np.asarray([w.weight for w in weighted]),
                "M": np.asarray([[match_factor(d, w) for d in docs] for w in weighted]),
                "cov_engine": np.asarray([engine.get(d["id"], 0.0) for d in docs]),
                "cos": V @ np.asarray(vector),
                "scos": (V @ P.T).max(1) if len(P) else V @ np.asarray(vector),
                "time": 0.5 ** (np.maximum(age, 0) / p.half_life_days),
            }
        )
    with open(DUMP, "wb") as f:
        pickle.dump(out, f)
    print(f"{len(out)} queries → {DUMP}")


def coverage(d: dict, kind: str, a: float) -> np.ndarray:
    """Shares × a function of the word's document frequency in scope, renormalised."""
    M, w = d["M"], d["weights"]
    if not len(w):
        return np.zeros(len(d["ids"]))
    n, df = M.shape[1], (M > 0).sum(1)
    factor = {
        "none": np.ones(len(w)),
        "idf^a": np.log(1 + (n - df + 0.5) / (df + 0.5)) ** a,
        "(1-df/n)^a": (1 - df / n) ** a,
        "1/(1+a·df)": 1 / (1 + a * df),
    }[kind]
    wt = w * factor
    return np.minimum((wt / wt.sum()) @ M, 1.0) if wt.sum() > 0 else np.zeros(n)


def evaluate() -> None:
    with open(DUMP, "rb") as f:
        data = pickle.load(f)
    err = max(
        float(np.abs(coverage(d, "none", 0) - d["cov_engine"]).max()) for d in data if d["ids"]
    )
    print(f"coverage recombined from the per-word matrix vs the engine's: max |diff| {err:.2e}")
    for style in ("long", "short"):
        missed = no_word = deep = 0
        for d in data:
            if (d["style"] == "long") != (style == "long"):
                continue
            v = 0.5 * d["cos"] + 0.5 * d["scos"]
            cov = coverage(d, "none", 0)
            rank = np.argsort(np.argsort(-(0.48 * cov + 0.47 * v / 0.18 + 0.03 * d["time"])))
            for i, mid in enumerate(d["ids"]):
                if mid in d["gold"] and rank[i] >= 5:
                    missed += 1
                    no_word += cov[i] == 0
                    deep += rank[i] >= 20
        print(
            f"{style}: gold memories outside the top 5: {missed}, with coverage 0: {no_word}, "
            f"below the top 20: {deep}"
        )
    grid = [("none", 0.0)] + [
        (kind, a)
        for kind, values in (
            ("idf^a", (0.5, 1, 2)),
            ("(1-df/n)^a", (1, 2, 4)),
            ("1/(1+a·df)", (0.02, 0.05, 0.1, 0.3)),
        )
        for a in values
    ]
    print("R@5 (halves: qid odd = a) | long a | long b | short a | short b")
    for kind, a in grid:
        for kw in (0.48, 0.6):
            res: dict[str, list[float]] = {}
            for d in data:
                v = 0.5 * d["cos"] + 0.5 * d["scos"]
                sc = kw * coverage(d, kind, a) + 0.47 * v / 0.18 + 0.03 * d["time"]
                ranked = [d["ids"][i] for i in np.argsort(-sc, kind="stable")]
                half = "a" if int(d["qid"].rsplit("-", 1)[1]) % 2 else "b"
                group = ("long " if d["style"] == "long" else "short ") + half
                res.setdefault(group, []).append(metrics(ranked, d["gold"])["recall@5"])
            cells = " | ".join(f"{np.mean(res[g]):.3f}" for g in sorted(res))
            print(f"{kind:12s} a={a:<5} kw {kw:.2f} | {cells}")


if __name__ == "__main__":
    dump() if sys.argv[1:] == ["dump"] else evaluate()
