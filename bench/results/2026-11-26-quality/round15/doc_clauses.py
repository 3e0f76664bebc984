"""Round 15: a memory's best clause as part of the vector term, offline.

A Chinese memory is usually two or three clauses ("what happened；what the agent said"). A vague
dialogue tends to point at one of them, and the whole memory's vector averages them. This
embeds every clause of every memory (split at 。；！？ and at ， when a piece is long) and scores
``(1 − β)·cos(memory) + β·max_j cos(clause j)`` in place of the memory's cosine (the query side
is unchanged: whole query and its sentences, as on the engine), then the package's own anchor
feedback. R@5 per set and half.

    python bench/results/2026-11-26-quality/round15/doc_clauses.py dump CORPUS PREFIX OUT.pkl
    python bench/results/2026-11-26-quality/round15/doc_clauses.py eval OUT.pkl [...]

``R15_LONG=100000`` splits at sentence ends only (``doc_clauses_sentences.txt``); the default
also splits pieces longer than 24 characters at commas (``doc_clauses_comma.txt``). Round 15
dumped the hard set (``bench-q14-hd``) and the dev set (``bench-q14-zh``), written keywords.
"""

from __future__ import annotations

import os
import pickle
import re
import sys
from typing import Any

import numpy as np
from opensearchpy import OpenSearch, helpers

import bench.fusion_offline as fo
from bench.evalset import mean_metrics, metrics

URL = "http://127.0.0.1:9261"


LONG = int(os.environ.get("R15_LONG", "24"))  # 100000: split at sentence ends only


def clauses(text: str, long: int = LONG) -> list[str]:
    pieces = [p for p in re.split(r"[。；！？!?;]", text) if p.strip()]
    out: list[str] = []
    for p in pieces:
        out += [c for c in re.split(r"[，,]", p) if c.strip()] if len(p) > long else [p]
    return out if len(out) > 1 else []


def descriptions(prefix: str) -> dict[str, str]:
    es = OpenSearch(URL, timeout=120)
    out = {}
    for db in ("user", "official"):
        for h in helpers.scan(es, index=f"{prefix}-{db}-events", _source=["id", "description"]):
            out[str(h["_source"].get("id", h["_id"]))] = h["_source"]["description"]
    return out


def dump(corpus: str, prefix: str, out: str) -> None:
    from bench.common import make_kemem
    from kemem_es.text.dialogue import context_turns, split_label

    orig = fo._signals
    km = make_kemem(prefix)

    def signals(km: Any, text: str, params: Any, vectors: Any) -> dict[str, Any]:
        sig = orig(km, text, params, vectors)
        turns = context_turns(params.context, params.context_turns)
        q, _, parts = km.searcher.text.query_vector(split_label(text).text, turns, params)
        sig["q"] = np.asarray(q, dtype=np.float32)
        sig["P"] = np.asarray(parts, dtype=np.float32).reshape(len(parts), len(q))
        return sig

    fo._signals = signals
    args = type("A", (), {"set_name": "dialogue", "prefix": prefix, "corpus": corpus, "set": {}})
    data = fo.dump(args)
    desc = descriptions(prefix)
    ids = sorted({i for d in data for i in d["ids"]})
    by_doc: dict[str, np.ndarray] = {}
    pieces = [(i, c) for i in ids for c in clauses(desc.get(i, ""))]
    vecs = km.embedder.embed([c for _, c in pieces]) if pieces else np.zeros((0, 512))
    for (i, _), v in zip(pieces, vecs, strict=True):
        by_doc.setdefault(i, []).append(np.asarray(v, dtype=np.float32))
    with open(out, "wb") as f:
        pickle.dump({"data": data, "clauses": {k: np.stack(v) for k, v in by_doc.items()}}, f)
    print(f"{len(data)} queries, {len(pieces)} clauses of {len(by_doc)} memories")


def with_clauses(d: dict[str, Any], C: dict[str, np.ndarray], beta: float) -> dict[str, Any]:
    if beta == 0:
        return d
    best_q, best_p = d["cos"].copy(), d["scos"].copy()
    for k, i in enumerate(d["ids"]):
        if i in C:
            cc = C[i]
            best_q[k] = (cc @ d["q"]).max()
            best_p[k] = (cc @ d["P"].T).max() if len(d["P"]) else best_q[k]
    return d | {
        "cos": (1 - beta) * d["cos"] + beta * np.maximum(best_q, d["cos"]),
        "scos": (1 - beta) * d["scos"] + beta * np.maximum(best_p, d["scos"]),
    }


def top10(d: dict[str, Any]) -> list[str]:
    return fo.with_feedback(d, fo.fusion(d))


SETS = {"all": None, "short": ("recall", "situational"), "long": ("long",)}


def evaluate(paths: list[str]) -> None:
    loaded = []
    for p in paths:
        with open(p, "rb") as f:
            loaded.append((p.rsplit("/", 1)[-1], pickle.load(f)))
    for beta in (0.0, 0.15, 0.3, 0.5, 0.7, 1.0):
        out = {}
        for name, blob in loaded:
            data = [with_clauses(d, blob["clauses"], beta) for d in blob["data"]]
            for sname, styles in SETS.items():
                for half in ("", "a", "b"):
                    ds = [
                        d
                        for d in data
                        if (styles is None or d["style"] in styles) and half in ("", d["half"])
                    ]
                    if ds and (sname == "all" or name.startswith("zh")):
                        m = mean_metrics([metrics(top10(d), d["gold"]) for d in ds])
                        key = f"{name.split('.')[0]} {sname}" + (f" {half}" if half else "")
                        out[key] = round(m["recall@5"], 4)
        print(f"beta {beta}", out, flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "dump":
        dump(*sys.argv[2:5])
    else:
        evaluate(sys.argv[2:])
