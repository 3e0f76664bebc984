"""Offline experiments on how a dialogue query weighs its utterance and its earlier turns.

    python -m bench.context_offline dump --out bench/work/ctx.pkl [--prefix bench-q3-dialogue]
    python -m bench.context_offline eval bench/work/ctx.pkl [--styles long] [--half a]

``dump`` (against indices kept by ``bench.dialogue_eval --keep``): for every dialogue query,
the in-scope memories' stored vectors, keyword coverage and BM25 under a few context settings
(``context_turns`` × ``context_decay``, through ``bench.fusion_offline._signals``, i.e. the
package's own words), and the embeddings of the utterance, of its sentences, of every earlier
turn on its own and of the dialogue window over 2–8 turns. ``eval`` ranks with the engine's
fusion formula under query-vector variants (window length, per-turn vectors with a decaying
weight, the agent's turns weighted less, max over turns) and prints R@5 per set and half, so a
variant is tuned on one half and checked on the other before it goes into the engine.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.evalset import mean_metrics, metrics
from bench.fusion_offline import FLOOR, SPAN, dump_or_eval, top

KW_SETTINGS = ((4, 0.5), (8, 0.5), (8, 0.7), (8, 0.85))  # (context_turns, context_decay)
WINDOWS = (2, 4, 6, 8)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / max(float(np.linalg.norm(x)), 1e-12)


def dump(args: argparse.Namespace) -> list[dict[str, Any]]:
    from bench.common import make_kemem
    from bench.dialogue_eval import load_queries, qrels, query_text
    from bench.fusion_offline import _signals
    from kemem_es.contract.params import QueryParams
    from kemem_es.search.query_text import EMBED_MAX_CHARS
    from kemem_es.text.dialogue import context_turns, dialogue_window, keep_end, sentences

    km, gold = make_kemem(args.prefix), qrels()
    emb = km.embedder
    out = []
    for n, q in enumerate(load_queries()):
        text, context = query_text(q)
        now = datetime.fromisoformat(q["now"])
        row: dict[str, Any] = {"qid": q["qid"], "style": q["style"], "gold": gold[q["qid"]]}
        row["half"] = "a" if int(q["qid"].rsplit("-", 1)[1]) % 2 else "b"
        for turns, decay in KW_SETTINGS:
            p = QueryParams(
                user_id=q["user_id"],
                agent_id=q["agent_id"],
                context=context,
                now=now,
                context_turns=turns,
                context_decay=decay,
            )
            sig = _signals(km, text, p, None)
            if "ids" not in row:
                row.update(ids=sig["ids"], V=sig["V"], time=sig["time"], bm25=sig["bm25"])
            pos = {i: k for k, i in enumerate(sig["ids"])}
            assert set(pos) == set(row["ids"])
            row[f"cov{turns}_{decay}"] = sig["cov"][[pos[i] for i in row["ids"]]]
        utt = keep_end(text, EMBED_MAX_CHARS)
        all_turns = context_turns(context, 20)  # newest first
        row["roles"] = [t["role"] for t in reversed(q["turns"][:-1])]  # newest first
        pieces = sentences(utt, 4)
        windows = [dialogue_window(text, all_turns[:k], EMBED_MAX_CHARS)[0] for k in WINDOWS]
        texts = [utt, *windows, *[t.text for t in all_turns], *pieces]
        E = emb.embed(texts).astype(np.float32)
        row["u"] = E[0]
        row["win"] = {k: E[1 + i] for i, k in enumerate(WINDOWS)}
        row["turns"] = E[1 + len(WINDOWS) : 1 + len(WINDOWS) + len(all_turns)]
        row["parts"] = E[1 + len(WINDOWS) + len(all_turns) :]
        out.append(row)
        if n % 50 == 0:
            print(n, file=sys.stderr)
    return out


# -- query-vector variants -------------------------------------------------------------------
def turn_mix(d: dict[str, Any], decay: float, agent: float, n: int) -> np.ndarray:
    """Σ_k decay^k · r_k · t_k over the newest n earlier turns (r = agent for the agent's)."""
    acc = np.zeros_like(d["u"])
    for k, (t, role) in enumerate(zip(d["turns"][:n], d["roles"][:n], strict=True)):
        acc += decay**k * (agent if role == "agent" else 1.0) * t
    return acc


def score(
    d: dict[str, Any], ctx: np.ndarray | None, w: float, kw: str = "cov4_0.5", s: float = 0.5
) -> np.ndarray:
    """The engine's fusion with query vector w·u + (1−w)·ctx (both unit) and sentence parts
    blended the same way."""
    V = d["V"].astype(np.float32)
    if ctx is None:
        q, parts = d["u"], list(d["parts"])
    else:
        c = _unit(ctx)
        q = _unit(w * d["u"] + (1 - w) * c)
        parts = [_unit(w * p + (1 - w) * c) for p in d["parts"]]
    cos = V @ q
    scos = (V @ np.stack(parts).T).max(axis=1) if parts else cos
    vec = ((1 - s) * cos + s * scos - FLOOR) / SPAN
    return 0.40 * d[kw] + 0.55 * vec + 0.03 * d["time"], vec


def variants() -> dict[str, Callable[[dict[str, Any]], tuple[np.ndarray, np.ndarray]]]:
    out: dict[str, Callable] = {}
    out["default (win4, w0.4, kw 4/0.5)"] = lambda d: score(d, d["win"][4], 0.4)
    out["utterance only"] = lambda d: score(d, None, 1.0)
    for k in WINDOWS:
        for w in (0.2, 0.3, 0.4):
            out[f"win{k} w{w}"] = lambda d, k=k, w=w: score(d, d["win"][k], w)
    for kw in ("cov8_0.5", "cov8_0.7", "cov8_0.85"):
        out[f"win4 w0.4 {kw}"] = lambda d, kw=kw: score(d, d["win"][4], 0.4, kw)
        out[f"win8 w0.3 {kw}"] = lambda d, kw=kw: score(d, d["win"][8], 0.3, kw)
    for decay, agent, w in itertools.product((0.6, 0.8, 1.0), (0.3, 0.6, 1.0), (0.2, 0.3, 0.4)):
        out[f"turns d{decay} a{agent} w{w}"] = lambda d, decay=decay, agent=agent, w=w: score(
            d, turn_mix(d, decay, agent, 8), w
        )
    for decay, agent, w, m in itertools.product((0.7, 0.85), (0.5, 1.0), (0.2, 0.3), (0.5,)):
        out[f"win8+turns d{decay} a{agent} w{w}"] = lambda d, decay=decay, agent=agent, w=w, m=m: (
            score(d, m * d["win"][8] + (1 - m) * _unit(turn_mix(d, decay, agent, 8)), w)
        )
    for k, w, kw in itertools.product((6, 8), (0.2, 0.25, 0.3, 0.35), ("cov8_0.5", "cov8_0.7")):
        out[f"grid win{k} w{w} {kw}"] = lambda d, k=k, w=w, kw=kw: score(d, d["win"][k], w, kw)
    for w, kw, wk in itertools.product((0.2, 0.25), ("cov8_0.7", "cov8_0.85"), (0.3, 0.4, 0.5)):
        out[f"kwgrid win8 w{w} {kw} kw{wk}"] = lambda d, w=w, kw=kw, wk=wk: reweigh(
            score(d, d["win"][8], w, kw), d[kw], wk
        )
    for w, m in itertools.product((0.2, 0.3), (0.3, 0.5)):
        out[f"maxwin w{w} m{m} cov8_0.7"] = lambda d, w=w, m=m: multi(d, w, m)
        out[f"maxturn w{w} m{m} cov8_0.7"] = lambda d, w=w, m=m: maxturn(d, w, m)
    return out


def reweigh(fv: tuple[np.ndarray, np.ndarray], cov: np.ndarray, wk: float) -> tuple:
    """The same signals with keyword weight wk and vector weight 0.95 − wk."""
    fused, vec = fv
    return fused + (wk - 0.40) * cov - (wk - 0.40) * vec, vec


def multi(d: dict[str, Any], w: float, m: float) -> tuple[np.ndarray, np.ndarray]:
    """vec = (1−m)·vec(window 8) + m·max over the windows of 2, 4, 8 turns."""
    fused8, vec8 = score(d, d["win"][8], w, "cov8_0.7")
    vmax = np.max([score(d, d["win"][k], w)[1] for k in WINDOWS], axis=0)
    vec = (1 - m) * vec8 + m * vmax
    return fused8 + 0.55 * (vec - vec8), vec


def maxturn(d: dict[str, Any], w: float, m: float) -> tuple[np.ndarray, np.ndarray]:
    """vec = (1−m)·vec(window 8) + m·max over the user's earlier turns, blended with u."""
    fused8, vec8 = score(d, d["win"][8], w, "cov8_0.7")
    users = [t for t, r in zip(d["turns"], d["roles"], strict=True) if r == "user"][:3]
    if not users:
        return fused8, vec8
    vmax = np.max([score(d, t, 0.5)[1] for t in users], axis=0)
    vec = (1 - m) * vec8 + m * vmax
    return fused8 + 0.55 * (vec - vec8), vec


def evaluate(args: argparse.Namespace) -> None:
    with open(args.file, "rb") as f:
        data = [d for d in pickle.load(f) if d["style"] in args.styles]
    groups = {
        "short a": lambda d: d["style"] != "long" and d["half"] == "a",
        "short b": lambda d: d["style"] != "long" and d["half"] == "b",
        "long a": lambda d: d["style"] == "long" and d["half"] == "a",
        "long b": lambda d: d["style"] == "long" and d["half"] == "b",
    }
    print(f"{'variant':40s} " + " ".join(f"{g:>8s}" for g in groups) + "   vec-only long a/b")
    for name, fn in variants().items():
        if args.grep and args.grep not in name:
            continue
        ranked, vranked = {}, {}
        for d in data:
            fused, vec = fn(d)
            ranked[d["qid"]], vranked[d["qid"]] = top(d, fused), top(d, vec)
        cells, vcells = [], []
        for g, pick in groups.items():
            sub = [d for d in data if pick(d)]
            r = mean_metrics([metrics(ranked[d["qid"]], d["gold"]) for d in sub]) if sub else {}
            cells.append(f"{r.get('recall@5', float('nan')):8.3f}")
            if g.startswith("long"):
                v = mean_metrics([metrics(vranked[d["qid"]], d["gold"]) for d in sub])
                vcells.append(f"{v['recall@5']:.3f}")
        print(f"{name:40s} " + " ".join(cells) + "   " + "/".join(vcells))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--out", type=Path, required=True)
    d.add_argument("--prefix", default="bench-q3-dialogue")
    e = sub.add_parser("eval")
    e.add_argument("file", type=Path)
    e.add_argument("--styles", nargs="+", default=["recall", "situational", "long"])
    e.add_argument("--grep", default="")
    return dump_or_eval(p.parse_args(argv), dump, evaluate)


if __name__ == "__main__":
    raise SystemExit(main())
