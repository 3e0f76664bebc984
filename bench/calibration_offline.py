"""Offline: the keyword/vector balance together with the vector calibration and the threshold.

    python -m bench.calibration_offline bench/work/sig-dialogue.pkl \
        [--memdaily bench/work/sig-md-user.pkl bench/work/sig-md-pooled.pkl]

Reads ``bench.fusion_offline dump`` pickles (the dialogue dump carries each query's style and
every memory's strength). The fused score is

    score = w_kw·cov + w_vec·(v − floor)/(ceil − floor) + 0.03·time + 0.02·strength,
    v = (1 − s)·cos(whole) + s·max_j cos(sentence j),

so the ranking depends on w_kw : w_vec/(ceil − floor) only, and the floor shifts every score
(for a fixed threshold it plays the threshold's part). For each (w_kw, span) the script ranks
the dialogue sets (R@5 per set and half, fusion − best of bm25 / vector / rrf) and MemDaily,
then picks the floor at which the memory a dialogue was written for clears the threshold in
the same share of queries as round 3's defaults did (0.40 / 0.55, floor 0.62), and reports how
often some other memory clears it there, and, for several gold shares, the other share at the
threshold that gives it: at an equal gold share, a lower other share is a better calibration.
``--signals``: other signals on top of a heavier keyword balance instead of the grid.
"""

from __future__ import annotations

import argparse
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.evalset import metrics
from bench.fusion_offline import rrf, top

Doc = dict[str, Any]
GROUPS: dict[str, Callable[[Doc], bool]] = {
    "long a": lambda d: d["style"] == "long" and d["half"] == "a",
    "long b": lambda d: d["style"] == "long" and d["half"] == "b",
    "short a": lambda d: d["style"] != "long" and d["half"] == "a",
    "short b": lambda d: d["style"] != "long" and d["half"] == "b",
}
CURVE = (0.85, 0.87, 0.89, 0.91)  # gold shares at which the other share is read
BASE = {"kw": 0.40, "vec": 0.55, "floor": 0.62, "span": 0.18}  # round 3's defaults


def v(d: Doc, s: float = 0.5) -> np.ndarray:
    return (1 - s) * d["cos"] + s * d["scos"]


def score(d: Doc, kw: float, vec: float, floor: float, span: float) -> np.ndarray:
    strength = d.get("strength", 0.0)
    return kw * d["cov"] + vec * (v(d) - floor) / span + 0.03 * d["time"] + 0.02 * strength


def r5(data: Sequence[Doc], ranked: dict[str, list[str]]) -> float:
    return float(np.mean([metrics(ranked[d["qid"]], d["gold"])["recall@5"] for d in data]))


def ndcg(data: Sequence[Doc], ranked: dict[str, list[str]]) -> float:
    return float(np.mean([metrics(ranked[d["qid"]], d["gold"])["ndcg@10"] for d in data]))


def baselines(data: Sequence[Doc]) -> dict[str, dict[str, list[str]]]:
    return {
        "bm25": {d["qid"]: top(d, d["bm25"], d["bm25"] > 0) for d in data},
        "vector": {d["qid"]: top(d, v(d)) for d in data},
        "rrf": {d["qid"]: rrf(d) for d in data},
    }


def best_scores(data: Sequence[Doc], scores: dict[str, np.ndarray]) -> tuple[np.ndarray, ...]:
    """Per query: the written-for memory's score if it is in the top 10 (else −inf), and the
    best score of a memory outside the gold in the top 10 (dialogue_eval's definitions)."""
    g, o = [], []
    for d in data:
        s = scores[d["qid"]]
        order = np.argsort(-s, kind="stable")[:10]
        first = next(i for i, r in d["gold"].items() if r == 2)
        top10 = {d["ids"][i]: s[i] for i in order}
        g.append(top10.get(first, -np.inf))
        o.append(max([x for i, x in top10.items() if i not in d["gold"]], default=-np.inf))
    return np.asarray(g), np.asarray(o)


def shares(data: Sequence[Doc], scores: dict[str, np.ndarray], t: float) -> tuple[float, float]:
    """(gold, other) shares at threshold t (a returned hit also needs a score > 0)."""
    g, o = best_scores(data, scores)
    return float(np.mean((g >= t) & (g > 0))), float(np.mean((o >= t) & (o > 0)))


def matched_floor(
    data: Sequence[Doc], kw: float, vec: float, span: float, target: float, t: float = 0.5
) -> float:
    """The highest floor at which the gold share at threshold t still reaches ``target``."""
    g, _ = best_scores(data, {d["qid"]: score(d, kw, vec, 0.0, span) for d in data})
    # with floor f every score drops by vec·f/span: gold clears t iff g − vec·f/span ≥ t
    need = int(np.ceil(target * len(g) - 1e-9))
    kth = np.sort(g)[::-1][need - 1]  # the need-th best gold score at floor 0
    return float((kth - t) * span / vec) - 1e-9


def curve(
    data: Sequence[Doc], kw: float, vec: float, span: float, golds: Sequence[float]
) -> list[float]:
    """The other share at the threshold where the gold share is each of ``golds``."""
    g, o = best_scores(data, {d["qid"]: score(d, kw, vec, 0.0, span) for d in data})
    out = []
    for target in golds:
        need = int(np.ceil(target * len(g) - 1e-9))
        t = np.sort(g)[::-1][need - 1]
        out.append(float(np.mean(o >= t)))
    return out


def signal_variants() -> dict[str, Callable[[Doc], np.ndarray]]:
    """Other signals fusion could use on top of a heavier keyword balance (kw 0.50 / vec 0.45,
    span 0.18; the adopted 0.48 / 0.47 ranks the dialogue sets the same): a concave or convex
    keyword term, a keyword × vector agreement term, a keyword weight that follows how many
    words the query has, or how clearly the vector side has an answer."""

    def fused(d: Doc, kw: float = 0.50, vec: float = 0.45, cov: Any = None) -> np.ndarray:
        c = d["cov"] if cov is None else cov
        return kw * c + vec * (v(d) - 0.62) / 0.18 + 0.03 * d["time"] + 0.02 * d.get("strength", 0)

    def gap(d: Doc) -> float:
        top2 = np.sort(v(d))[-2:]
        return float(top2[-1] - top2[0]) if len(top2) == 2 else 0.0

    out: dict[str, Callable[[Doc], np.ndarray]] = {
        "round 3: kw 0.40 / vec 0.55": lambda d: fused(d, 0.40, 0.55),
        "round 4: kw 0.48 / vec 0.47": lambda d: fused(d, 0.48, 0.47),
        "kw 0.50 / vec 0.45 (the base below)": fused,
    }
    for p in (0.5, 0.7, 1.5):
        out[f"cov^{p}"] = lambda d, p=p: fused(d, cov=d["cov"] ** p)
        out[f"cov^{p}, kw 0.40 / vec 0.55"] = lambda d, p=p: fused(d, 0.40, 0.55, d["cov"] ** p)
    for lam in (0.1, 0.2, 0.5):
        out[f"+ {lam}·cov·max(vec, 0)"] = lambda d, lam=lam: (
            fused(d) + lam * d["cov"] * np.clip((v(d) - 0.62) / 0.18, 0, None)
        )
    for k in (3, 5, 8):
        out[f"kw 0.55 × min(1, words/{k})"] = lambda d, k=k: fused(
            d, 0.55, 0.40, d["cov"] * min(1.0, d["n_words"] / k)
        )
    for a in (0.5, 1.0, 2.0):
        out[f"kw × (1 + {a}·(0.8 − best cos)/0.1)"] = lambda d, a=a: fused(
            d, cov=d["cov"] * max(0.2, 1 + a * (0.8 - float(v(d).max())) / 0.1)
        )
    for a in (0.5, 1.0):
        out[f"kw × (1 − {a}·(cos gap 1st−2nd − 0.02)/0.02)"] = lambda d, a=a: fused(
            d, cov=d["cov"] * max(0.2, 1 - a * (gap(d) - 0.02) / 0.02)
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dialogue", type=Path)
    p.add_argument("--memdaily", type=Path, nargs="*", default=[])
    p.add_argument("--kw", type=float, nargs="+", default=[0.40, 0.45, 0.50, 0.55])
    p.add_argument("--span", type=float, nargs="+", default=[0.14, 0.16, 0.18, 0.20, 0.22])
    p.add_argument("--no-calibrate", action="store_true")
    p.add_argument("--signals", action="store_true", help="other signals instead of the grid")
    p.add_argument(
        "--floors",
        type=float,
        nargs="*",
        default=None,
        help="span 0.18, each --kw: gold/other at these floors, and the round-3 weights' other "
        "share at the same gold share (per set too)",
    )
    p.add_argument(
        "--engine",
        type=Path,
        default=None,
        help="a bench.dialogue_eval result: its bm25/vector/rrf R@5 per half are the baselines "
        "(the engine's rrf merges per database; the offline rrf ranks the scope as one list)",
    )
    args = p.parse_args(argv)
    with open(args.dialogue, "rb") as f:
        data = pickle.load(f)
    md = []
    for path in args.memdaily:
        with open(path, "rb") as f:
            md.append((path.stem, pickle.load(f)))
    groups = {g: [d for d in data if pick(d)] for g, pick in GROUPS.items()}
    base = baselines(data)
    best = {g: max(r5(sub, base[m]) for m in base) for g, sub in groups.items()}
    if args.engine:
        import json

        from bench.dialogue_eval import halves

        cells = halves(json.loads(args.engine.read_text()))
        best = {g: max(cells[m][g] for m in ("bm25", "vector", "rrf")) for g in groups}
        print("engine best single mode R@5: " + "  ".join(f"{g} {x:.3f}" for g, x in best.items()))
    print(
        "baselines R@5 "
        + "  ".join(
            f"{g}: " + "/".join(f"{m} {r5(sub, base[m]):.3f}" for m in base)
            for g, sub in groups.items()
        )
    )
    for name, mdata in md:
        mb = baselines(mdata)
        print(
            f"{name}: "
            + "  ".join(f"{m} {r5(mdata, mb[m]):.3f}/{ndcg(mdata, mb[m]):.3f}" for m in mb)
        )
    if args.signals:
        print("R@5 (fusion − engine's best single mode) per half; MemDaily R@5/nDCG@10")
        for name, fn in signal_variants().items():
            ranked = {d["qid"]: top(d, fn(d)) for d in data}
            row = " ".join(
                f"{r5(sub, ranked):.3f} {r5(sub, ranked) - best[g]:+.3f}"
                for g, sub in groups.items()
            )
            for _, mdata in md:
                mr = {d["qid"]: top(d, fn(d)) for d in mdata}
                row += f"  {r5(mdata, mr):.3f}/{ndcg(mdata, mr):.3f}"
            print(f"{name:44s} {row}", flush=True)
        return 0
    if args.floors is not None:
        sets = {
            "all": data,
            "long": [d for d in data if d["style"] == "long"],
            "short": [d for d in data if d["style"] != "long"],
        }
        b = BASE
        print("gold/other at threshold 0.5 (round-3 weights' other share at that gold share)")
        for kw in args.kw:
            vec = round(0.95 - kw, 4)
            for floor in args.floors:
                cells = []
                for sub in sets.values():
                    sc = {d["qid"]: score(d, kw, vec, floor, 0.18) for d in sub}
                    g, o = shares(sub, sc, 0.5)
                    before = curve(sub, b["kw"], b["vec"], b["span"], [g])[0]
                    cells.append(f"{g:.3f}/{o:.3f} ({before:.3f})")
                print(
                    f"kw {kw:.3f} vec {vec:.3f} floor {floor:.4f}  "
                    + "  ".join(f"{n} {c}" for n, c in zip(sets, cells, strict=True)),
                    flush=True,
                )
        return 0
    b = BASE
    base_scores = {d["qid"]: score(d, b["kw"], b["vec"], b["floor"], b["span"]) for d in data}
    g0, o0 = shares(data, base_scores, 0.5)
    print(f"round-3 defaults at 0.5: gold {g0:.3f} other {o0:.3f}")
    print(
        "round-3 defaults, other share at gold "
        + "/".join(map(str, CURVE))
        + ": "
        + "/".join(f"{x:.3f}" for x in curve(data, b["kw"], b["vec"], b["span"], CURVE))
    )
    head = "kw    vec   span  ρ      " + " ".join(f"{g:>14s}" for g in groups)
    head += (
        "   floor  gold  other  other at gold "
        + "/".join(map(str, CURVE))
        + "".join(f"  {n:>13s}" for n, _ in md)
    )
    print(head)
    for kw in args.kw:
        vec = round(0.95 - kw, 4)
        for span in args.span:
            ranked = {d["qid"]: top(d, score(d, kw, vec, 0.62, span)) for d in data}
            cells = [
                f"{r5(sub, ranked):.3f} {r5(sub, ranked) - best[g]:+.3f}"
                for g, sub in groups.items()
            ]
            row = f"{kw:.3f} {vec:.3f} {span:.3f} {kw * span / vec:.4f} " + " ".join(
                f"{c:>14s}" for c in cells
            )
            if not args.no_calibrate:
                floor = matched_floor(data, kw, vec, span, g0)
                sc = {d["qid"]: score(d, kw, vec, floor, span) for d in data}
                g, o = shares(data, sc, 0.5)
                row += f"   {floor:.4f} {g:.3f} {o:.3f} "
                row += "/".join(f"{x:.3f}" for x in curve(data, kw, vec, span, CURVE))
            for _, mdata in md:
                mr = {d["qid"]: top(d, score(d, kw, vec, 0.62, span)) for d in mdata}
                row += f"  {r5(mdata, mr):.3f}/{ndcg(mdata, mr):.3f}"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
