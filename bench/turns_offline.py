"""How close the per-turn window vector (``context_vector="turns"``) comes to the joint window's.

    python -m bench.turns_offline [--corpus zh hard implied] [--limit N] [--out FILE]

No engine: for every dialogue query of the sets, the joint window (the earlier turns that fit
the model and the utterance, one text) is embedded as the query path does, and so is each of
its pieces alone. The window's vector is then rebuilt from the pieces four ways — normalised
or pooled (mean-pooled, before normalisation) vectors, each weighted by its tokens or by its
tokens + 2 ([CLS] and [SEP], which each piece's own mean includes) — and its cosine to the
joint vector is reported (median, 10th percentile), also for the blended query vector
(0.2·utterance + 0.8·window) the search uses. The earlier-turns window (``"earlier"``) is the
reference: the cosine of its blended query vector to the joint one's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np


def _unit(x: np.ndarray) -> np.ndarray:
    return x / max(float(np.linalg.norm(x)), 1e-12)


def _stats(xs: Sequence[float]) -> dict[str, float]:
    a = np.asarray(xs)
    return {
        "median": round(float(np.median(a)), 4),
        "p10": round(float(np.percentile(a, 10)), 4),
        "min": round(float(a.min()), 4),
        "mean": round(float(a.mean()), 4),
    }


def measure(corpora: Sequence[str], limit: int | None) -> dict[str, Any]:
    from bench.common import DEFAULT_MODEL_DIR
    from bench.dialogue_eval import CORPUS_STYLES, load_queries, query_text
    from kemem_es.embed.onnx import Embedder
    from kemem_es.search.query_text import EMBED_MAX_CHARS, EMBED_MAX_TOKENS
    from kemem_es.text.dialogue import context_turns, dialogue_window, keep_end, window_turns

    model = Embedder(DEFAULT_MODEL_DIR)
    pooled_model = Embedder(DEFAULT_MODEL_DIR, normalize=False)

    def length(t: str) -> int:
        return model.count_tokens([t])[0]

    out: dict[str, Any] = {}
    for corpus in corpora:
        qs = load_queries(styles=CORPUS_STYLES[corpus], corpus=corpus)[:limit]
        cos: dict[str, list[float]] = {}
        for n, q in enumerate(qs):
            text, context = query_text(q)
            turns = context_turns(context, 8)
            if not turns:
                continue
            utt = keep_end(text, EMBED_MAX_CHARS)
            window, _ = dialogue_window(text, turns, EMBED_MAX_TOKENS, length)
            kept, _ = window_turns(text, turns, EMBED_MAX_TOKENS, length)
            earlier, _ = dialogue_window("", turns, EMBED_MAX_TOKENS, length)
            pieces = [utt, *kept]
            texts = [window, earlier.rstrip("\n"), *pieces]
            vecs = model.embed_queries(texts).astype(np.float64)
            joint, early, normed = vecs[0], vecs[1], vecs[2:]
            pooled = pooled_model.embed_queries(pieces).astype(np.float64)
            sizes = np.asarray([length(p) for p in pieces], dtype=np.float64)
            u = normed[0]

            def blend(d: np.ndarray, u: np.ndarray = u) -> np.ndarray:
                return _unit(0.2 * u + 0.8 * d)

            approx = {
                "normalised, tokens": _unit((normed * sizes[:, None]).sum(0)),
                "normalised, tokens+2": _unit((normed * (sizes + 2)[:, None]).sum(0)),
                "pooled, tokens": _unit((pooled * sizes[:, None]).sum(0)),
                "pooled, tokens+2": _unit((pooled * (sizes + 2)[:, None]).sum(0)),
                "normalised, equal": _unit(normed.sum(0)),
            }
            qj = blend(joint)
            for name, d in approx.items():
                cos.setdefault(f"window: {name}", []).append(float(d @ joint))
                cos.setdefault(f"query: {name}", []).append(float(blend(d) @ qj))
            cos.setdefault("query: earlier window", []).append(float(blend(early) @ qj))
            cos.setdefault("query: utterance alone", []).append(float(u @ qj))
            if n % 50 == 0:
                print(corpus, n, file=sys.stderr)
        out[corpus] = {"queries": len(next(iter(cos.values()), []))}
        out[corpus].update({k: _stats(v) for k, v in cos.items()})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", nargs="+", default=["zh", "hard", "implied"])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    result = measure(args.corpus, args.limit)
    text = json.dumps(result, ensure_ascii=False, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    for corpus, rows in result.items():
        print(f"## {corpus} ({rows['queries']} queries with context)")
        for k, v in rows.items():
            if k != "queries":
                print(f"  {k:34s} median {v['median']:.4f}  p10 {v['p10']:.4f}  min {v['min']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
