"""Offline: vector-only R@5 on the English session questions for document-vector variants.

    python bench/results/2026-11-26-quality/round6/vec_offline.py  (writes offline_doc_vectors.txt)

Documents embedded with windows of 64/128/256 tokens (this round's embedder, ``long_window``),
one 512-token window, or per sentence (mean, max, max + mean, mean of the best two); the query
is the question alone. R@5 counts a query as found when any gold memory is in the top 5.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kemem_es.embed.onnx import Embedder

MODEL = Path(__file__).resolve().parents[5] / "shared" / "models" / "m3e-small-onnx"
DATA = Path(__file__).resolve().parents[3] / "dialogue_en"


def jsonl(name: str) -> list[dict]:
    with open(DATA / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def found(scores: np.ndarray, queries: list[dict], docs: list[dict]) -> list[float]:
    """Per query: 1 when a gold memory is among the 5 best of ``scores`` (queries × docs)."""
    out = []
    for i, q in enumerate(queries):
        best = np.argsort(-scores[i])[:5]
        out.append(float(any(docs[j]["id"] in q["gold"] for j in best)))
    return out


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def main() -> None:
    events = jsonl("events.jsonl")
    queries = [q for q in jsonl("queries.jsonl") if q["style"] == "english_session"]
    embedders = {n: Embedder(MODEL, max_length=256, long_window=n) for n in (64, 128, 256)}
    embedders[512] = Embedder(MODEL, max_length=512)
    by_sentence: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
        "sent_mean": lambda s, q: q @ unit(s.mean(0)),
        "sent_max": lambda s, q: (q @ s.T).max(1),
        "sent_max+mean": lambda s, q: 0.5 * (q @ s.T).max(1) + 0.5 * (q @ unit(s.mean(0))),
        "top2_sent": lambda s, q: np.sort(q @ s.T, axis=1)[:, -2:].mean(1),
    }
    hits: dict[str, list[float]] = {}
    for scope in sorted({(q["agent_id"], q["user_id"]) for q in queries}):
        docs = [e for e in events if (e["agent_id"], e["user_id"]) == scope]
        sq = [q for q in queries if (q["agent_id"], q["user_id"]) == scope]
        qv = embedders[256].embed([q["turns"][-1]["text"] for q in sq])
        for n, emb in embedders.items():
            dv = emb.embed([d["description"] for d in docs])
            hits.setdefault(f"mean{n}", []).extend(found(qv @ dv.T, sq, docs))
        sentences = [
            embedders[256].embed([p for p in re.split(r"(?<=[.!?])\s+", d["description"]) if p])
            for d in docs
        ]
        for name, f in by_sentence.items():
            scores = np.stack([f(s, qv) for s in sentences], axis=1)
            hits.setdefault(name, []).extend(found(scores, sq, docs))
    for name, h in hits.items():
        print(f"{name:14s} R@5(any gold) {np.mean(h):.3f} n={len(h)}")


if __name__ == "__main__":
    main()
