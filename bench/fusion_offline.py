"""Offline fusion experiments: every signal of every in-scope memory, then ranking formulas.

    python -m bench.fusion_offline dump dialogue --out bench/work/sig-dialogue.pkl
    python -m bench.fusion_offline dump memdaily --pooled --n 600 --out bench/work/sig-md.pkl
    python -m bench.fusion_offline eval bench/work/sig-dialogue.pkl

``dump`` runs the package's own query pipeline (words, context, bridges, query and sentence
vectors) against kept bench indices (``bench.dialogue_eval --keep`` / ``bench.memdaily --keep``)
and asks the engine for the keyword coverage and BM25 of every memory in scope (exact scoring,
no window); cosines come from the stored vectors. ``eval`` ranks with the current fusion (and,
where the dump kept the vectors, with the package's anchor feedback on top: the engine's
answer), the single-signal modes and the alternatives issue 12 suggested (score normalisation
over the scope, an rrf-like rank component, pseudo-relevance feedback, a linear model fitted on
one half and scored on the other), so that a formula is only moved into the engine when it
measurably helps.
Reproduces the engine's R@5 to ±0.005 (rrf: its windows; two_stage is not modelled).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.evalset import mean_metrics, metrics

Doc = dict[str, Any]
# round 4's vec calibration (0.593 since round 6); the ranking needs only the span
FLOOR, SPAN = 0.595, 0.18
KW, VEC = 0.48, 0.47  # the default fusion weights (round 4; before: 0.40 / 0.55)


# -- dump --------------------------------------------------------------------------------------
def _signals(km: Any, text: str, params: Any, vectors: dict[str, np.ndarray] | None) -> Doc:
    from kemem_es.search import events as ev
    from kemem_es.search.clauses import EVENT_FIELDS, coverage_clauses, keyword_clauses
    from kemem_es.search.stopwatch import Stopwatch
    from kemem_es.store.layout import DATABASES, index_alias
    from kemem_es.store.scope import Scope
    from kemem_es.text.dialogue import context_turns, split_label

    s = km.searcher
    utterance = split_label(text).text
    turns = context_turns(params.context, params.context_turns)
    vector, _, parts = s.text.query_vector(utterance, turns, params)
    names = s.names.visible(Scope.of(agent_id=params.agent_id, user_id=params.user_id))
    _, _, _, words = s.text.words(utterance, params, Stopwatch(), turns, vector, names)
    found = s.search_entities(params, words, vector)
    bridges = s.text.bridge_words(params, words, found, names)
    words = [*words, *bridges]
    cov = coverage_clauses(words, expansion_share=params.expansion_share)
    kwc = keyword_clauses(words, EVENT_FIELDS)
    rows: dict[str, Doc] = {}
    for db in DATABASES:
        alias = index_alias(s.engine.settings.index_prefix, db, "events")
        for name, clauses in (("cov", cov), ("bm25", kwc)):
            src = ["id", "event_time", "strength"] + (["vector"] if vectors is None else [])
            body = {"size": 10_000, "query": ev.candidate_query(db, params, clauses)}
            body["_source"] = src
            for h in s.engine.search(alias, body, ignore_unavailable=True)["hits"]["hits"]:
                doc = h["_source"]
                row = rows.setdefault(str(doc.get("id", h["_id"])), {})
                row[name] = float(h["_score"])
                if "vector" in doc:
                    row["v"] = np.asarray(doc["vector"], dtype=np.float32)
                row["t"] = doc.get("event_time")
                row["s"] = float(doc.get("strength") or 0.0)
    ids = list(rows)
    V = np.stack([rows[i]["v"] if vectors is None else vectors[i] for i in ids])
    q = np.asarray(vector, dtype=np.float32)
    P = np.asarray(parts, dtype=np.float32).reshape(len(parts), len(q))
    # days before ``now``, to the second: the time term, and how far apart two memories are
    age = np.asarray(
        [
            (params.now - datetime.fromisoformat(rows[i]["t"][:19])).total_seconds() / 86400
            if rows[i]["t"]
            else 0.0
            for i in ids
        ]
    )
    weighted = [w for w in words if w.weighted and w.weight > 0]
    return {
        "kw_total": float(sum(w.weight for w in weighted)),
        "kw_utt": float(sum(w.weight for w in weighted if not w.context)),
        "n_words": len(weighted),
        "ids": ids,
        "cov": np.minimum([rows[i].get("cov", 0.0) for i in ids], 1.0),
        "bm25": np.asarray([rows[i].get("bm25", 0.0) for i in ids]),
        "cos": V @ q,
        "scos": (V @ P.T).max(axis=1) if len(parts) else V @ q,
        "time": 0.5 ** (np.maximum(age, 0) / params.half_life_days),
        "age": age,
        "strength": np.asarray([rows[i]["s"] / (rows[i]["s"] + params.strength_k) for i in ids]),
        "V": V.astype(np.float16),
    }


def dump(args: argparse.Namespace) -> list[Doc]:
    from bench.common import make_kemem
    from kemem_es.contract.params import QueryParams

    out: list[Doc] = []
    if args.set_name == "dialogue":
        from bench.dialogue_eval import load_queries, qrels, query_text

        km, gold = make_kemem(args.prefix or "bench-q-dialogue"), qrels(args.corpus)
        for q in load_queries(corpus=args.corpus):
            text, context = query_text(q)
            now = datetime.fromisoformat(q["now"])
            p = QueryParams(
                user_id=q["user_id"], agent_id=q["agent_id"], context=context, now=now, **args.set
            )
            half = "a" if int(q["qid"].rsplit("-", 1)[1]) % 2 else "b"
            sig = _signals(km, text, p, None)
            style = q["style"]
            out.append(
                {"qid": q["qid"], "half": half, "style": style, "gold": gold[q["qid"]], **sig}
            )
        return out
    from bench.evalset import EvalSet, source_file
    from bench.memdaily import AGENT, POOL, embeddings, sample

    es = EvalSet.load(args.data)
    km = make_kemem(args.prefix or "bench-q-md")
    vecs = embeddings(km, [d["text"] for d in es.docs], "int8")
    by_id = {
        (POOL if args.pooled else "") + d["doc_id"]: v for d, v in zip(es.docs, vecs, strict=True)
    }
    for k, q in enumerate(sample(es.queries, args.n, seed=1 if args.pooled else 0)):
        user = POOL + source_file(q["namespace"]) if args.pooled else q["namespace"]
        now = datetime.fromisoformat(q["timestamp"])
        p = QueryParams(
            user_id=user, agent_id=AGENT, now=now, expand=False, entity_limit=0, **args.set
        )
        sig = _signals(km, q["text"], p, by_id)
        if args.drop_vectors:  # only pseudo-relevance feedback needs them; pooled scopes are big
            del sig["V"]
        sig["ids"] = [i.removeprefix(POOL) for i in sig["ids"]]
        half = "a" if k % 2 else "b"
        out.append({"qid": q["qid"], "half": half, "gold": es.qrels[q["qid"]], **sig})
    return out


# -- ranking formulas --------------------------------------------------------------------------
def top(d: Doc, score: np.ndarray, mask: np.ndarray | None = None, k: int = 10) -> list[str]:
    order = [i for i in np.argsort(-score, kind="stable") if mask is None or mask[i]]
    return [d["ids"][i] for i in order[:k]]


def ranks(x: np.ndarray) -> np.ndarray:
    r = np.empty(len(x))
    r[np.argsort(-x, kind="stable")] = np.arange(1, len(x) + 1)
    return r


def vec(d: Doc, s: float = 0.5) -> np.ndarray:
    """The engine's vector term (sentence_weight s), calibrated."""
    return ((1 - s) * d["cos"] + s * d["scos"] - FLOOR) / SPAN


def fusion(d: Doc, wk: float = KW, wv: float = VEC, s: float = 0.5) -> np.ndarray:
    return wk * d["cov"] + wv * vec(d, s) + 0.03 * d["time"]


def with_feedback(d: Doc, score: np.ndarray, params: Any = None) -> list[str]:
    """The top 10 after the package's own anchor feedback (``search.anchor.feedback``) over
    ``score``'s best hits, as the engine's answer gets it: each hit carries its vector code and
    (user memories) its time, as the event search's doc values would. Needs the dump's ``V``."""
    from kemem_es.contract.params import QueryParams
    from kemem_es.search import anchor
    from kemem_es.store import vector_code
    from kemem_es.store.layout import TIME_FIELD, VECTOR_CODE_FIELD

    params = params or QueryParams(agent_id="a", user_id="u")
    rows = []
    for i in np.argsort(-score, kind="stable")[: anchor.request_size(params, "user")]:
        fields: dict[str, list[str]] = {}
        if "official" not in d["ids"][i]:
            fields[TIME_FIELD] = [str(int((1e5 - d["age"][i]) * 86_400_000))]
        fields[VECTOR_CODE_FIELD] = [vector_code.encode(d["V"][i].astype(np.float32))]
        rows.append((d["ids"][i], {"fields": fields}, float(score[i])))
    return [r[0] for r in anchor.feedback(params, rows)[:10]]


def rrf(d: Doc, k: int = 60, window: int = 40) -> list[str]:
    score = np.zeros(len(d["ids"]))
    for x, mask in ((d["bm25"], d["bm25"] > 0), (vec(d), None)):
        order = [i for i in np.argsort(-x, kind="stable") if mask is None or mask[i]]
        for r, i in enumerate(order[:window], 1):
            score[i] += 1 / (k + r)
    return top(d, score, score > 0)


def prf(d: Doc, lam: float = 0.3) -> np.ndarray:
    """Pseudo-relevance feedback: + similarity to the best hit's memory."""
    s = fusion(d)
    V = d["V"].astype(np.float32)
    return s + lam * VEC * (V @ V[int(np.argmax(s))] - FLOOR) / SPAN


def features(d: Doc) -> np.ndarray:
    v = vec(d)
    return np.stack(
        [
            d["cov"],
            v,
            d["bm25"] / (d["bm25"] + 4),
            (v - v.mean()) / (v.std() + 1e-9) / 4,  # z-score over the scope
            v - v.max(),  # relative to the scope's best
            61 / (60 + ranks(v)),  # rrf-like rank components
            (61 / (60 + ranks(d["bm25"]))) * (d["bm25"] > 0),
        ],
        axis=1,
    )


FEATURES = ("cov", "vec", "bm25_sat", "vec_z", "vec_rel_max", "rank_vec", "rank_bm25")


def fit_linear(train: Sequence[Doc]) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    X = np.concatenate([features(d) for d in train])
    y = np.concatenate([[d["gold"].get(i, 0) > 0 for i in d["ids"]] for d in train])
    model = LogisticRegression(max_iter=3000, class_weight="balanced").fit(X, y)
    return model.coef_[0]


def _minmax(x: np.ndarray) -> np.ndarray:
    return (x - x.min()) / (x.max() - x.min() + 1e-9)


def methods(data: Sequence[Doc]) -> dict[str, Callable[[Doc], list[str]]]:
    def by(score: Callable[[Doc], np.ndarray]) -> Callable[[Doc], list[str]]:
        return lambda d: top(d, score(d))

    out: dict[str, Callable[[Doc], list[str]]] = {
        "fusion (engine formula)": by(fusion),
        "bm25": lambda d: top(d, d["bm25"], d["bm25"] > 0),
        "vector": by(vec),
        "rrf": rrf,
        "fusion without sentence vectors": by(lambda d: fusion(d, s=0.0)),
        "vector without sentence vectors": by(lambda d: vec(d, 0.0)),
        "fusion kw 0.4 / vec 0.55 (round 3)": by(lambda d: fusion(d, 0.40, 0.55)),
        "fusion + 0.1 bm25/(bm25+4)": by(lambda d: fusion(d) + 0.1 * features(d)[:, 2]),
        "min-max of both over the scope": by(
            lambda d: 0.3 * _minmax(d["cov"]) + 0.7 * _minmax(vec(d))
        ),
        "kw + z-score of vec over the scope": by(
            lambda d: 0.5 * d["cov"] + 0.5 * features(d)[:, 3]
        ),
        "fusion + 0.1 × rrf rank term": by(lambda d: fusion(d) + 0.1 * features(d)[:, 5:].sum(1)),
        "pseudo-relevance feedback (top 1, 0.3)": by(prf),
    }
    if all("V" in d for d in data):  # memdaily dumps may drop the vectors
        out["fusion + anchor feedback (engine)"] = lambda d: with_feedback(d, fusion(d))
    for name, train_half in (("linear model fitted on half a", "a"), ("… on half b", "b")):
        w = fit_linear([d for d in data if d["half"] == train_half])
        out[name] = lambda d, w=w: top(d, features(d) @ w)
    return out


def evaluate(args: argparse.Namespace) -> None:
    with open(args.file, "rb") as f:
        data = pickle.load(f)
    print(f"{len(data)} queries; R@5 / nDCG@10, all and per half (linear: scored on the other)")
    print(f"{'method':42s} {'R@5':>6s} {'nDCG':>6s} {'R@5 a':>6s} {'R@5 b':>6s}")
    for name, fn in methods(data).items():
        ranked = {d["qid"]: fn(d) for d in data}
        row = [mean_metrics([metrics(ranked[d["qid"]], d["gold"]) for d in data])]
        for h in "ab":
            row.append(
                mean_metrics([metrics(ranked[d["qid"]], d["gold"]) for d in data if d["half"] == h])
            )
        print(
            f"{name:42s} {row[0]['recall@5']:6.3f} {row[0]['ndcg@10']:6.3f} "
            f"{row[1]['recall@5']:6.3f} {row[2]['recall@5']:6.3f}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("set_name", choices=["dialogue", "memdaily"])
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--data", type=Path, default=Path("../shared/data/dev/memdaily"))
    d.add_argument("--pooled", action="store_true")
    d.add_argument(
        "--corpus",
        choices=["zh", "en", "check", "fresh", "hard"],
        default="zh",
        help="dialogue set",
    )
    d.add_argument("--n", type=int, default=600, help="memdaily: seeded sample of queries")
    d.add_argument("--prefix", default=None)
    d.add_argument("--drop-vectors", action="store_true", help="memdaily: keep no memory vectors")
    d.add_argument("--set", type=json.loads, default={}, help="JSON of QueryParams overrides")
    e = sub.add_parser("eval")
    e.add_argument("file", type=Path)
    return dump_or_eval(p.parse_args(argv), dump, evaluate)


def dump_or_eval(
    args: argparse.Namespace,
    dump: Callable[[argparse.Namespace], list[Any]],
    evaluate: Callable[[argparse.Namespace], None],
) -> int:
    """``dump``: signals through the package into a pickle; ``eval``: formulas over one."""
    if args.cmd == "dump":
        data = dump(args)
        with open(args.out, "wb") as f:
            pickle.dump(data, f)
        print(f"{len(data)} queries → {args.out}", file=sys.stderr)
    else:
        evaluate(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
