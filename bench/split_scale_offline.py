"""Whether a rebuilt dialogue window (``context_vector="split"`` / ``"turns"``) puts its cosines on
the joint window's scale, and which per-query factor brings them back.

    python -m bench.split_scale_offline [--corpus zh hard implied fresh] [--limit N] [--out FILE]

No engine: for every dialogue query with context, the query vector is built as the query path
builds it for joint, split and turns (the whole utterance; sentences left out), and each user's
memories (their ``description``, as the indexer embeds it) are embedded with the same model.
For every query and memory: the cosine under joint (the reference the vector floor and ceiling
were calibrated with), under split and turns as they are, and under split / turns with a
per-query factor applied (the issue's proposal ``-A``; the package's rule ``-G<γ>``,
search.window_scale). Reported per corpus, mean over queries:
the difference to joint of the mean cosine over the user's memories (``all``), of the relevant
memory's cosine (``gold``) and of the best non-relevant memory's (``best_other``), and the root
mean square of the per-memory difference (``rms``). A factor is right when all three
differences are near 0. ``by_style``: the same differences (``mean`` over the user's
memories, ``gold``, ``best_other``) per dialogue style; ``per_query``: every query's values.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

GAMMAS = (0.25, 0.375, 0.5, 0.75, 1.0)


def _mean_diff(rows: list[dict[str, Any]], name: str, key: str) -> float:
    """The mean over queries of ``name``'s value minus joint's (where the memory is in scope)."""
    diffs = [r[name][key] - r["joint"][key] for r in rows if r["joint"][key] is not None]
    return round(float(np.mean(diffs)), 4) if diffs else 0.0


def _unit(x: np.ndarray) -> np.ndarray:
    return x / max(float(np.linalg.norm(x)), 1e-12)


def memories(corpus: str) -> list[dict[str, Any]]:
    from bench.dialogue_eval import CORPORA, HERE
    from kemem_es.front.indexing import demo_path

    if corpus == "zh":
        paths = [demo_path("user_events.jsonl"), HERE / "extra_events.jsonl"]
        paths.append(HERE / "extra_events_long.jsonl")
    else:
        paths = [Path(CORPORA[corpus]) / "events.jsonl"]
    rows: list[dict[str, Any]] = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            rows += [json.loads(line) for line in f if line.strip()]
    return rows


def measure(corpora: Sequence[str], limit: int | None) -> dict[str, Any]:
    from bench.common import DEFAULT_MODEL_DIR
    from bench.dialogue_eval import CORPUS_STYLES, load_queries, qrels, query_text
    from kemem_es.contract.params import QueryParams
    from kemem_es.embed.onnx import Embedder
    from kemem_es.search.query_text import EMBED_MAX_CHARS, EMBED_MAX_TOKENS, utterance_weight
    from kemem_es.search.turn_vectors import weighted_mean
    from kemem_es.search.window_scale import pieces_mean, rebuilt_blend
    from kemem_es.text.dialogue import context_turns, dialogue_window, keep_end, window_turns

    model = Embedder(DEFAULT_MODEL_DIR)

    def length(t: str) -> int:
        return int(model.count_tokens([t])[0])

    out: dict[str, Any] = {}
    for corpus in corpora:
        mems = memories(corpus)
        gold = qrels(corpus)
        mvec = model.embed([m["description"] for m in mems]).astype(np.float64)
        by_user: dict[tuple[str, str], list[int]] = {}
        for i, m in enumerate(mems):
            by_user.setdefault((m["user_id"], m["agent_id"]), []).append(i)
        qs = load_queries(styles=CORPUS_STYLES[corpus], corpus=corpus)[:limit]
        diffs: dict[str, dict[str, list[float]]] = {}
        per_query: list[dict[str, Any]] = []
        factors: dict[str, list[float]] = {}
        for n, q in enumerate(qs):
            text, context = query_text(q)
            turns = context_turns(context, 8)
            idx = by_user.get((q["user_id"], q["agent_id"]), [])
            if not turns or not idx:
                continue
            params = QueryParams(agent_id=q["agent_id"], user_id=q["user_id"])
            utt = keep_end(text, EMBED_MAX_CHARS)
            w = utterance_weight(params, utt, turns)
            joint, _ = dialogue_window(text, list(turns), EMBED_MAX_TOKENS, length)
            earlier, _ = dialogue_window("", list(turns), EMBED_MAX_TOKENS, length)
            earlier = earlier.rstrip("\n")
            kept, _ = window_turns(text, list(turns), EMBED_MAX_TOKENS, length)
            texts = [utt, joint, earlier, *kept]
            vecs = model.embed_queries(texts).astype(np.float64)
            u, jv, ev, tv = vecs[0], vecs[1], vecs[2], vecs[3:]
            M = mvec[idx]
            ids = [mems[i]["id"] for i in idx]
            rel = gold.get(q["qid"], {})
            g = next((ids.index(d) for d, r in rel.items() if r == 2 and d in ids), None)
            others = [k for k, d in enumerate(ids) if d not in rel]
            ref = M @ _unit(w * u + (1 - w) * jv)
            cands: dict[str, np.ndarray] = {}
            for name, pieces, sizes in (
                ("split", [u, ev], [length(utt), length(earlier)]),
                ("turns", [u, *tv], [length(utt), *(length(t) for t in kept)]),
            ):
                d = weighted_mean(pieces, sizes)
                r = pieces_mean(pieces, sizes)
                nd = float(np.linalg.norm(r))
                v = w * u + (1 - w) * d
                cos = M @ _unit(v)
                cands[name] = cos  # as the engine scored it before (γ = 0)
                nv = float(np.linalg.norm(v))
                # the proposal: f = |v| / sqrt(|v|² + (1−w)²(1−n²)) on the cosines
                fa = nv / np.sqrt(nv**2 + (1 - w) ** 2 * (1 - nd**2))
                cands[f"{name}-A"] = cos * fa
                # the window's cosines read at n^γ of their renormalised value (the package's
                # rule, search.window_scale; γ = 1: the pieces' mean cosine)
                share = 1 - sizes[0] / sum(sizes)
                sent, f = rebuilt_blend(u, r, w, share)
                cands[f"{name}-fixed"] = (M @ sent) * f  # the package's rule
                factors.setdefault(f"{name}-fixed", []).append(f)
                for gam in GAMMAS:  # a constant γ
                    sent, f = rebuilt_blend(u, r, w, 1.0, gam)
                    cands[f"{name}-G{gam}"] = (M @ sent) * f
                    factors.setdefault(f"{name}-G{gam}", []).append(f)
                factors.setdefault(f"{name}-n", []).append(nd)
            rec: dict[str, Any] = {"qid": q["qid"], "w": w, "style": q["style"]}
            rec["n_split"] = float(
                np.linalg.norm(pieces_mean([u, ev], [length(utt), length(earlier)]))
            )
            rec["uE"] = float(u @ ev)
            rec["uJ"] = float(u @ jv)
            rec["EJ"] = float(ev @ jv)
            rec["tok"] = [length(utt), length(earlier)]
            for name, cos in {"joint": ref, **cands}.items():
                rec[name] = {
                    "gold": float(cos[g]) if g is not None else None,
                    "best_other": float(cos[others].max()) if others else None,
                    "mean": float(cos.mean()),
                }
            per_query.append(rec)
            for name, cos in cands.items():
                row = diffs.setdefault(name, {})
                row.setdefault("all", []).append(float((cos - ref).mean()))
                row.setdefault("rms", []).append(float(np.sqrt(((cos - ref) ** 2).mean())))
                if g is not None:
                    row.setdefault("gold", []).append(float(cos[g] - ref[g]))
                if others:
                    best = float(cos[others].max() - ref[others].max())
                    row.setdefault("best_other", []).append(best)
            if n % 50 == 0:
                print(corpus, n, file=sys.stderr)
        by_style: dict[str, dict[str, dict[str, float]]] = {}
        for st in sorted({r["style"] for r in per_query}):
            rows = [r for r in per_query if r["style"] == st]
            by_style[st] = {
                name: {key: _mean_diff(rows, name, key) for key in ("mean", "gold", "best_other")}
                for name in cands
            }
        out[corpus] = {
            "queries": len(next(iter(factors.values()), [])),
            "by_style": by_style,
            "factor_median": {k: round(float(np.median(v)), 4) for k, v in factors.items()},
            "per_query": per_query,
            **{
                name: {k: round(float(np.mean(v)), 4) for k, v in row.items()}
                for name, row in diffs.items()
            },
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--corpus", nargs="+", default=["zh", "hard", "implied", "fresh"])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    result = measure(args.corpus, args.limit)
    text = json.dumps(result, ensure_ascii=False, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
