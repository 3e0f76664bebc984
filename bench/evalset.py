"""Generic loader and metrics for eval sets in the corpus/queries/qrels layout.

A directory holds ``corpus.jsonl[.gz]`` (doc_id, namespace, kind, text, timestamp, meta),
``queries.jsonl[.gz]`` (qid, namespace, text, timestamp, meta) and ``qrels.tsv[.gz]``
(qid, doc_id, relevance). Any set in this layout runs with ``python -m bench.memdaily --data DIR``.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO


def _open(directory: Path, stem: str) -> TextIO:
    for name in (stem, stem + ".gz"):
        path = directory / name
        if path.exists():
            if name.endswith(".gz"):
                return gzip.open(path, "rt", encoding="utf-8")
            return path.open(encoding="utf-8")
    raise FileNotFoundError(f"{directory}: neither {stem} nor {stem}.gz")


def _jsonl(directory: Path, stem: str) -> Iterator[dict[str, Any]]:
    with _open(directory, stem) as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


@dataclass
class EvalSet:
    name: str
    docs: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: str | Path) -> EvalSet:
        directory = Path(directory)
        docs = list(_jsonl(directory, "corpus.jsonl"))
        queries = list(_jsonl(directory, "queries.jsonl"))
        qrels: dict[str, dict[str, int]] = {}
        with _open(directory, "qrels.tsv") as fh:
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 2 or parts[0] in ("qid", "query-id"):
                    continue
                rel = int(parts[2]) if len(parts) > 2 and parts[2] else 1
                if rel > 0:
                    qrels.setdefault(parts[0], {})[parts[1]] = rel
        queries = [q for q in queries if q["qid"] in qrels]  # unjudged queries are not scored
        return cls(directory.name, docs, queries, qrels)


def source_file(namespace: str) -> str:
    """MemDaily namespaces are ``<file stem>:<trajectory>``; other sets pool by their prefix."""
    return namespace.split(":", 1)[0]


def metrics(ranked: Sequence[str], gold: dict[str, int], k: int = 10) -> dict[str, float]:
    """recall@1/5/10, nDCG@10 (binary or graded gains) and MRR@10 for one query."""
    top = list(ranked[:k])
    n_gold = len(gold)
    out = {
        f"recall@{c}": (sum(1 for d in top[:c] if d in gold) / n_gold if n_gold else 0.0)
        for c in (1, 5, 10)
    }
    dcg = sum((2 ** gold[d] - 1) / math.log2(i + 2) for i, d in enumerate(top) if d in gold)
    ideal = sorted(gold.values(), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    out["ndcg@10"] = dcg / idcg if idcg else 0.0
    out["mrr"] = next((1.0 / (i + 1) for i, d in enumerate(top) if d in gold), 0.0)
    return out


METRICS = ("recall@1", "recall@5", "recall@10", "ndcg@10", "mrr")


def mean_metrics(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {m: 0.0 for m in METRICS}
    return {m: round(sum(r[m] for r in rows) / len(rows), 4) for m in METRICS}
