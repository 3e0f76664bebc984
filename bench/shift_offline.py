"""Offline look at topic shift: how a dialogue query's earlier-turn words and its vectors score
each memory in scope, so that a way of weighing the earlier turns' words down when the last turn
moves on can be tried on every set before it goes into the engine.

    python -m bench.shift_offline dump --corpus implied --prefix bench-shift-implied \
        --out bench/work/shift-implied.pkl
    python -m bench.shift_offline eval bench/work/shift-implied.pkl [more.pkl ...]

``dump`` (against indices kept by ``bench.dialogue_eval --keep``) runs the package's own query
pipeline (words, bridges, query and sentence vectors) and asks the engine for each in-scope
memory's keyword coverage in two parts, the utterance's (``covU``) and the earlier turns'
(``covC``, ``clauses.coverage_parts``); cosines come from the stored vectors. It also keeps
the utterance's vector, the joint window's and (for analysis only, not on the request path)
the earlier turns' own. ``eval`` ranks with the engine's fusion formula (anchor feedback
included) under variants of the earlier-turn words' weight and prints R@5 / nDCG@10 per style.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.evalset import mean_metrics, metrics

Doc = dict[str, Any]
KW, VEC = 0.48, 0.47


def _unit(x: np.ndarray) -> np.ndarray:
    return x / max(float(np.linalg.norm(x)), 1e-12)


def dump(args: argparse.Namespace) -> list[Doc]:
    from bench.common import make_kemem
    from bench.dialogue_eval import load_queries, qrels, query_text
    from kemem_es.contract.params import QueryParams
    from kemem_es.search import events as ev
    from kemem_es.search.clauses import coverage_parts
    from kemem_es.search.query_text import EMBED_MAX_TOKENS, utterance_weight
    from kemem_es.search.stopwatch import Stopwatch
    from kemem_es.store.layout import DATABASES, index_alias
    from kemem_es.text.dialogue import context_turns, dialogue_window, split_label

    km, gold = make_kemem(args.prefix), qrels(args.corpus)
    s = km.searcher
    out: list[Doc] = []
    for q in load_queries(corpus=args.corpus):
        text, context = query_text(q)
        now = datetime.fromisoformat(q["now"])
        params = QueryParams(user_id=q["user_id"], agent_id=q["agent_id"], context=context, now=now)
        utterance = split_label(text).text
        turns = context_turns(params.context, params.context_turns)
        plan = s.plan(utterance, turns, params, now, Stopwatch())
        params, vector, parts, names, words = (
            plan.params, plan.vector, plan.parts, plan.names, plan.words,
        )  # fmt: skip
        found = s.search_entities(params, words, vector)
        words = [*words, *s.text.bridge_words(params, words, found, names)]
        utt, ctx = coverage_parts(words, expansion_share=params.expansion_share)
        rows: dict[str, Doc] = {}
        for db in DATABASES:
            alias = index_alias(s.engine.settings.index_prefix, db, "events")
            for name, clauses in (("covU", utt), ("covC", ctx)):
                body = {
                    "size": 10_000,
                    "query": ev.candidate_query(db, params, clauses),
                    "_source": ["id", "event_time", "vector"],
                }
                for h in s.engine.search(alias, body, ignore_unavailable=True)["hits"]["hits"]:
                    doc = h["_source"]
                    row = rows.setdefault(str(doc.get("id", h["_id"])), {})
                    row[name] = float(h["_score"]) if clauses else 0.0
                    row["v"] = np.asarray(doc["vector"], dtype=np.float32)
                    row["t"] = doc.get("event_time")
        ids = list(rows)
        V = np.stack([rows[i]["v"] for i in ids])
        qv = np.asarray(vector, dtype=np.float32)
        P = np.asarray(parts, dtype=np.float32).reshape(len(parts), len(qv))
        age = np.asarray(
            [
                (now - datetime.fromisoformat(rows[i]["t"][:19])).total_seconds() / 86400
                if rows[i]["t"]
                else 0.0
                for i in ids
            ]
        )
        joint, _ = dialogue_window(utterance, list(turns), EMBED_MAX_TOKENS, s.text.length)
        earlier = s.text.earlier_window(turns)[0] if turns else ""
        emb = s.text.embed_queries([utterance, joint, earlier or utterance]).astype(np.float32)
        weighted = [w for w in words if w.weighted and w.weight > 0]
        out.append(
            {
                "qid": q["qid"],
                "style": q["style"],
                "gold": gold.get(q["qid"], {}),
                "ids": ids,
                "covU": np.asarray([rows[i].get("covU", 0.0) for i in ids]),
                "covC": np.asarray([rows[i].get("covC", 0.0) for i in ids]),
                "cos": V @ qv,
                "scos": (V @ P.T).max(axis=1) if len(parts) else V @ qv,
                "cosU": V @ _unit(emb[0]),
                "time": 0.5 ** (np.maximum(age, 0) / params.half_life_days),
                "age": age,
                "V": V.astype(np.float16),
                "u": emb[0],
                "joint": emb[1],
                "earlier": emb[2] if turns else None,
                "w": utterance_weight(params, utterance, turns) if turns else 1.0,
                "kw_utt": float(sum(w.weight for w in weighted if not w.earlier)),
                "kw_ctx": float(sum(w.weight for w in weighted if w.earlier)),
                "n_utt": sum(1 for w in weighted if not w.context),
                "utt_words": [w.word for w in weighted if not w.context],
                "ctx_words": [w.word for w in weighted if w.earlier],
                "n_turns": len(turns),
                "floor": params.vec_floor,
                "span": params.vec_ceil - params.vec_floor,
                "utt_len": len(utterance),
            }
        )
        if len(out) % 50 == 0:
            print(f"{len(out)} queries", file=sys.stderr)
    return out


# -- eval --------------------------------------------------------------------------------------
def with_feedback(d: Doc, score: np.ndarray) -> list[str]:
    from bench.fusion_offline import with_feedback as fb

    return fb(d, score)


def fused(d: Doc, g: float | np.ndarray) -> np.ndarray:
    kw = np.minimum(d["covU"] + g * d["covC"], 1.0)
    vec = (0.5 * d["cos"] + 0.5 * d["scos"] - d["floor"]) / d["span"]
    return KW * kw + VEC * vec + 0.03 * d["time"]


Variant = Callable[[Doc], "float | np.ndarray"]


def evaluate(docs: list[Doc], variants: dict[str, Variant]) -> None:
    styles = sorted({d["style"] for d in docs})
    for name, fn in variants.items():
        cells = []
        for st in styles:
            ms = []
            for d in (x for x in docs if x["style"] == st):
                ranked = with_feedback(d, fused(d, fn(d)))
                ms.append(metrics(ranked, d["gold"]))
            m = mean_metrics(ms)
            cells.append(f"{st} {m['recall@5']:.3f}/{m['ndcg@10']:.3f}")
        print(f"{name:28s} " + "  ".join(cells))


def _vec_u(d: Doc) -> np.ndarray:
    """Each memory's cosine to the utterance's own vector, on the model's calibrated scale."""
    return np.asarray((d["cosU"] - d["floor"]) / d["span"])


def _own(d: Doc) -> float:
    """The utterance's share of the query's keyword weight (its own words against the earlier
    turns' words): near 0 for a vague last turn, high for one that tells its episode."""
    return float(d["kw_utt"] / max(d["kw_utt"] + d["kw_ctx"], 1e-9))


def _step(t: float) -> Variant:
    return lambda d: (_vec_u(d) >= t).astype(float)


def _rel(delta: float, k: int = 20) -> Variant:
    """Context words count for a memory whose cosine to the utterance is within ``delta``
    (calibrated) of the best among the default ranking's top ``k``."""

    def f(d: Doc) -> np.ndarray:
        top = np.argsort(-fused(d, 1.0), kind="stable")[:k]
        best = _vec_u(d)[top].max()
        return (_vec_u(d) >= best - delta).astype(float)

    return f


def _when(cond: Callable[[Doc], bool], gate: Variant) -> Variant:
    return lambda d: gate(d) if cond(d) else 1.0


VARIANTS: dict[str, Variant] = {
    "default": lambda d: 1.0,
    "no context words": lambda d: 0.0,
    "gate lin vecU": lambda d: np.clip(_vec_u(d), 0, 1),
    "gate step 0.5": _step(0.5),
    "gate step 0.6": _step(0.6),
    "gate step 0.7": _step(0.7),
    "gate ramp .4-.8": lambda d: np.clip((_vec_u(d) - 0.4) / 0.4, 0, 1),
    "rel 0.2": _rel(0.2),
    "rel 0.3": _rel(0.3),
    "rel 0.4": _rel(0.4),
    "rel 0.5": _rel(0.5),
    "own>=.3 step .6": _when(lambda d: _own(d) >= 0.3, _step(0.6)),
    "own>=.4 step .6": _when(lambda d: _own(d) >= 0.4, _step(0.6)),
    "own>=.3 rel .3": _when(lambda d: _own(d) >= 0.3, _rel(0.3)),
    "w>0.2 rel .2": _when(lambda d: d["w"] > 0.2 + 1e-9, _rel(0.2)),
    "w>0.2 rel .3": _when(lambda d: d["w"] > 0.2 + 1e-9, _rel(0.3)),
    "w>0.2 rel .4": _when(lambda d: d["w"] > 0.2 + 1e-9, _rel(0.4)),
    "w>0.2 step .6": _when(lambda d: d["w"] > 0.2 + 1e-9, _step(0.6)),
    "w>=0.3 rel .2": _when(lambda d: d["w"] >= 0.3, _rel(0.2)),
    "w>=0.3 rel .3": _when(lambda d: d["w"] >= 0.3, _rel(0.3)),
    "w>0.2 nocw": _when(lambda d: d["w"] > 0.2 + 1e-9, lambda d: 0.0),
    "n>=6 rel .3": _when(lambda d: d["n_utt"] >= 6, _rel(0.3)),
    "n>=8 rel .3": _when(lambda d: d["n_utt"] >= 8, _rel(0.3)),
    "n>=8 rel .2": _when(lambda d: d["n_utt"] >= 8, _rel(0.2)),
    "w>.2 n>=6 rel .3": _when(lambda d: d["w"] > 0.2 + 1e-9 and d["n_utt"] >= 6, _rel(0.3)),
    "w>.2 n>=8 rel .3": _when(lambda d: d["w"] > 0.2 + 1e-9 and d["n_utt"] >= 8, _rel(0.3)),
    "w>.2 n>=8 rel .2": _when(lambda d: d["w"] > 0.2 + 1e-9 and d["n_utt"] >= 8, _rel(0.2)),
    "w>=.3 n>=6 rel .3": _when(lambda d: d["w"] >= 0.3 and d["n_utt"] >= 6, _rel(0.3)),
    "w>=.3 n>=8 rel .2": _when(lambda d: d["w"] >= 0.3 and d["n_utt"] >= 8, _rel(0.2)),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--corpus", default="implied")
    d.add_argument("--prefix", required=True)
    d.add_argument("--out", required=True)
    e = sub.add_parser("eval")
    e.add_argument("pkl", nargs="+")
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        docs = dump(args)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "wb") as f:
            pickle.dump(docs, f)
        return 0
    docs = [x for p in args.pkl for x in pickle.load(open(p, "rb"))]  # noqa: SIM115
    evaluate(docs, VARIANTS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
