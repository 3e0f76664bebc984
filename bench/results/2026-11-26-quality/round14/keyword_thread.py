"""Round 14: keyword-thread feedback, offline. When anchor feedback's gate fires, each other
hit among the best 20 that shares a keyword with the anchor gains a weight (``any``), a share
of the anchor's keywords (``share``), the window-rarity-weighted share (``idf``), or a weight
when a shared keyword is on at most 3 of the window's hits (``rare``); then the package's own
``search.anchor.feedback`` runs as on the engine. R@5 per set and half.

    python -m bench.fusion_offline dump dialogue --prefix P --out sig.pkl
    python bench/results/2026-11-26-quality/round14/keyword_thread.py sig.pkl P

``P`` is the kept store the dump came from: the keywords are read from it, so a store indexed
with ``--keywords tfidf`` is measured with the TF-IDF keywords.
"""

from __future__ import annotations

import itertools
import math
import sys
from typing import Any

import numpy as np
from opensearchpy import OpenSearch, helpers

from bench.evalset import mean_metrics, metrics
from bench.fusion_offline import fusion
from kemem_es.contract.params import QueryParams
from kemem_es.search import anchor
from kemem_es.store import vector_code
from kemem_es.store.layout import TIME_FIELD, VECTOR_CODE_FIELD

SETS = {"all": None, "short": ("recall", "situational"), "long": ("long",), "check": ("check",)}
WINDOW = 20


def store_keywords(url: str, prefix: str) -> dict[str, set[str]]:
    es = OpenSearch(url, timeout=120)
    out: dict[str, set[str]] = {}
    for db in ("user", "official"):
        for h in helpers.scan(es, index=f"{prefix}-{db}-events", _source=["id", "keywords"]):
            out[str(h["_source"].get("id", h["_id"]))] = set(h["_source"].get("keywords") or [])
    return out


def gain(kind: str, w: float, ka: set[str], kh: set[str], df: dict[str, int], n: int) -> float:
    shared = ka & kh
    if not shared:
        return 0.0
    if kind == "any":
        return w
    if kind == "share":
        return w * len(shared) / len(ka)
    if kind == "idf":
        r = {k: math.log(1 + n / max(df[k], 1)) for k in ka}
        return w * sum(r[k] for k in shared) / sum(r.values())
    return w * (min(df[k] for k in shared) <= 3)  # rare


def top10(d: dict[str, Any], kw: dict[str, set[str]], params: QueryParams, cand) -> list[str]:
    score = fusion(d)
    order = np.argsort(-score, kind="stable")[: anchor.request_size(params, "user")]
    rows = []
    for i in order:
        fields: dict[str, list[str]] = {}
        if "official" not in d["ids"][i]:
            fields[TIME_FIELD] = [str(int((1e5 - d["age"][i]) * 86_400_000))]
        fields[VECTOR_CODE_FIELD] = [vector_code.encode(d["V"][i].astype(np.float32))]
        rows.append((d["ids"][i], {"fields": fields}, float(score[i])))
    if cand and len(rows) > 1 and rows[0][2] - rows[1][2] >= cand[2]:
        ka = kw.get(rows[0][0], set())
        window = rows[1:WINDOW]
        df = {k: sum(k in kw.get(r[0], set()) for r in window) for k in ka}
        if ka:
            top = rows[0][2]
            rest = [
                (t, h, min(s + gain(cand[0], cand[1], ka, kw.get(t, set()), df, len(window)), top))
                for t, h, s in rows[1:]
            ]
            rows = [rows[0], *sorted(rest, key=lambda r: -r[2])]
    return [r[0] for r in anchor.feedback(params, rows)[:10]]


def main() -> None:
    import pickle

    with open(sys.argv[1], "rb") as f:
        data = pickle.load(f)
    kw = store_keywords("http://127.0.0.1:9261", sys.argv[2])
    params = QueryParams(agent_id="a", user_id="u")
    grid = [
        None,
        *itertools.product(("any", "share", "idf", "rare"), (0.05, 0.1, 0.2, 0.3, 0.5), (0.1, 0.2)),
    ]
    for cand in grid:
        out = {}
        for name, styles in SETS.items():
            for half in ("", "a", "b"):
                ds = [
                    d
                    for d in data
                    if (styles is None or d["style"] in styles) and half in ("", d["half"])
                ]
                if ds:
                    m = mean_metrics([metrics(top10(d, kw, params, cand), d["gold"]) for d in ds])
                    out[name + (f" {half}" if half else "")] = round(m["recall@5"], 4)
        print(cand or "anchor feedback as now", out, flush=True)


if __name__ == "__main__":
    main()
