"""Round 13: temporal contiguity, offline. Fusion's ranking of every in-scope memory (a
``bench.fusion_offline`` dump), reordered by the package's own ``search.anchor.feedback``
under a grid of settings; R@5 per set and per half.

    python -m bench.fusion_offline dump dialogue --prefix P --out bench/work/r13/sig-zh.pkl
    python bench/results/2026-11-26-quality/round13/contiguity_offline.py bench/work/r13/sig-zh.pkl

A dump without vectors (MemDaily pooled, ``--drop-vectors``) is ranked with the closeness in
meaning off. The engine's window is the dump's best ``max(anchor_window, contiguity_window)``;
as in the engine, the agent's official memories carry no time (``--only S``: the settings whose
printed form contains S).
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.evalset import mean_metrics, metrics
from bench.fusion_offline import fusion
from kemem_es.contract.params import QueryParams
from kemem_es.search import anchor
from kemem_es.store import vector_code
from kemem_es.store.layout import TIME_FIELD, VECTOR_CODE_FIELD

SETS = {
    "all": None,
    "short": ("recall", "situational"),
    "long": ("long",),
    "check": ("check",),
    "check_session": ("check_session",),
}
GRID = [
    {"contiguity_weight": 0.0},  # the feedback as before (meaning only)
    *(
        {"contiguity_weight": w, "contiguity_scale": s, "contiguity_window": n}
        for n in (20, 30, 50)
        for w in (0.1, 0.2, 0.3, 0.5)
        for s in (0.005, 0.02, 0.05, 0.1)
    ),
]


def ranked_top10(d: dict[str, Any], params: QueryParams) -> list[str]:
    score = fusion(d)
    n = anchor.request_size(params, "user") or params.limit
    order = np.argsort(-score, kind="stable")[:n]
    rows = []
    for i in order:
        fields: dict[str, list[str]] = {}
        if "official" not in d["ids"][i]:
            fields[TIME_FIELD] = [str(int((1e5 - d["age"][i]) * 86_400_000))]
        if "V" in d:
            fields[VECTOR_CODE_FIELD] = [vector_code.encode(d["V"][i].astype(np.float32))]
        rows.append((d["ids"][i], {"fields": fields}, float(score[i])))
    return [row[0] for row in anchor.feedback(params, rows)[:10]]


def r5(data: Sequence[dict[str, Any]], params: QueryParams) -> dict[str, float]:
    out = {}
    for name, styles in SETS.items():
        for half in ("", "a", "b"):
            ds = [
                d
                for d in data
                if (styles is None or d.get("style") in styles) and half in ("", d["half"])
            ]
            if ds:
                m = mean_metrics([metrics(ranked_top10(d, params), d["gold"]) for d in ds])
                out[name + (f" {half}" if half else "")] = round(m["recall@5"], 4)
    return out


def main() -> None:
    with open(sys.argv[1], "rb") as f:
        data = pickle.load(f)
    base = {} if "V" in data[0] else {"anchor_weight": 0.0}
    only = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--only" else None
    for setting in GRID:
        if only is not None and only not in str(setting):
            continue
        params = QueryParams(agent_id="a", user_id="u", **base, **setting)
        print(setting, r5(data, params), flush=True)


if __name__ == "__main__":
    main()
