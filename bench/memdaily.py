"""Retrieval quality on MemDaily (or any set in the corpus/queries/qrels layout).

    python -m bench.memdaily --data ../shared/data/dev/memdaily [--limit-queries N] [--keep]
        [--reuse] [--set JSON of QueryParams]

Mapping (documented in bench/README.md): every doc becomes an EventRecord in the *user* events
index with agent_id "eval", user_id = its namespace, description = text, created_at = timestamp,
place = meta.place, and keywords = the doc's top-5 TF-IDF words from the package's own keyword
picker (the same jieba tokenizer, dictionary and IDF table the query side uses), standing in
for the keywords an upstream extractor would attach. ``--keywords none`` indexes empty lists.

Two settings:
- per-namespace: each query searches its own namespace (one simulated user, 4–16 messages);
- pooled by file: the docs of all namespaces of one source file (the namespace prefix before
  ':') share one user id, so other trajectories become hard negatives (stress test; pooled
  messages can be false negatives).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import WORK, cli_main, eval_indices, make_kemem, percentiles, stamp
from bench.evalset import METRICS, EvalSet, mean_metrics, metrics, source_file

AGENT = "eval"
POOL = "pool|"
# name -> (mode, expand). Baselines run without expansion so they measure one signal each.
MODES: dict[str, tuple[str, bool]] = {
    "bm25": ("bm25", False),
    "vector": ("vector", False),
    "rrf": ("rrf", False),
    "fusion+expand": ("fusion", True),
    "fusion-noexpand": ("fusion", False),
    "two_stage": ("two_stage", True),
}


def embeddings(km: Any, texts: Sequence[str], variant: str) -> np.ndarray:
    """Embed once per (model, variant, texts); cached as .npy under bench/work/."""
    name = getattr(km.embedder, "name", "")  # the model's directory and variant
    digest = hashlib.sha1("\n".join([name, *texts]).encode()).hexdigest()[:12]
    # lowercased input (an uncased vocabulary) gives other vectors for text with capitals
    lc = "-lc" if getattr(km.embedder, "lowercases", False) else ""
    # int8 rows depend on their batch mates unless each text runs alone (batch 1)
    batch = f"-b{km.embedder.batch_size}" if km.embedder.variant != "fp32" else ""
    path = WORK / f"emb-{variant}{lc}{batch}-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path)
    t0 = time.perf_counter()
    vecs = km.embedder.embed(list(texts)).astype(np.float32)
    print(f"  embedded {len(texts)} texts in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    WORK.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def build_records(
    km: Any, es: EvalSet, vecs: np.ndarray, keywords: str, pooled_files: set[str] | None
) -> tuple[list[Any], list[Any]]:
    from kemem_es import EventRecord
    from kemem_es.store.documents import MEMORY_SENTENCES
    from kemem_es.text.dialogue import memory_sentences
    from kemem_es.text.keywords import pick_base_words

    per_ns, pooled = [], []
    for doc, vec in zip(es.docs, vecs, strict=True):
        kws: list[str] = []
        if keywords == "tfidf":
            kws = [b.word for b in pick_base_words(doc["text"], 5, tokenizer=km.tokenizer)]
        fields = {
            "agent_id": AGENT,
            "description": doc["text"],
            "created_at": datetime.fromisoformat(doc["timestamp"]),
            "place": (doc.get("meta") or {}).get("place", "") or "",
            "keywords": kws,
        }
        # The cached vectors save the model's time; a memory of several sentences is embedded
        # by the writer instead (the same vector: int8 runs each text alone), which then
        # embeds its sentences too (search.best_sentence): a supplied vector brings none.
        if not (km.settings.sentence_vectors and memory_sentences(doc["text"], MEMORY_SENTENCES)):
            fields["vector"] = vec.round(6).tolist()
        per_ns.append(EventRecord(id=doc["doc_id"], user_id=doc["namespace"], **fields))
        src = source_file(doc["namespace"])
        if pooled_files is None or src in pooled_files:
            pooled.append(EventRecord(id=POOL + doc["doc_id"], user_id=POOL + src, **fields))
    return per_ns, pooled


def index_all(km: Any, records: Sequence[Any], label: str, chunk: int = 4096) -> dict[str, Any]:
    t0 = time.perf_counter()
    written = rejected = 0
    for lo in range(0, len(records), chunk):
        rep = km.index_records(list(records[lo : lo + chunk]), kind="events", db="user")
        written += rep.indexed + rep.updated + rep.unchanged
        rejected += len(rep.rejected)
        if rep.rejected:
            print(f"  rejected: {rep.rejected[:3]}", file=sys.stderr)
    secs = time.perf_counter() - t0
    print(f"  {label}: {written} docs in {secs:.1f}s ({written / secs:.0f}/s)", file=sys.stderr)
    return {"docs": written, "rejected": rejected, "seconds": round(secs, 2)}


def ask(km: Any, q: dict[str, Any], pooled: bool, **options: Any) -> Any:
    """One MemDaily query as this harness asks it: the query's user (or its pooled source
    file), limit 10, threshold 0, no entities, the query's timestamp as ``now``."""
    user = POOL + source_file(q["namespace"]) if pooled else q["namespace"]
    return km.query(
        q["text"],
        user_id=user,
        agent_id=AGENT,
        limit=10,
        score_threshold=0.0,
        now=datetime.fromisoformat(q["timestamp"]),
        entity_limit=0,
        **options,
    )


def run_mode(
    km: Any,
    es: EvalSet,
    queries: Sequence[dict[str, Any]],
    mode: str,
    expand: bool,
    pooled: bool,
    workers: int,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    def one(q: dict[str, Any]) -> tuple[dict[str, float], float, int, str]:
        resp = ask(km, q, pooled, mode=mode, expand=expand, **(extra or {}))
        ids = [h.index.removeprefix(POOL) for h in resp.memory_events]
        leaks = 0
        if not pooled:  # the per-user filter must hold: every hit is from the query's namespace
            leaks = sum(1 for d in ids if not d.startswith(q["namespace"] + ":"))
        qtype = (q.get("meta") or {}).get("question_type", "all")
        m = metrics(ids, es.qrels[q["qid"]])
        return m, resp.additional_info.timings_ms["total"], leaks, qtype

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rows = list(pool.map(one, queries))
    wall = time.perf_counter() - t0
    by_type: dict[str, list[dict[str, float]]] = defaultdict(list)
    for m, _, _, qtype in rows:
        by_type[qtype].append(m)
    return {
        "n": len(rows),
        **mean_metrics([r[0] for r in rows]),
        "by_type_ndcg@10": {t: mean_metrics(v)["ndcg@10"] for t, v in sorted(by_type.items())},
        "namespace_leaks": sum(r[2] for r in rows),
        "latency_ms": percentiles(r[1] for r in rows),
        "wall_s": round(wall, 1),
    }


def sample(queries: list[dict[str, Any]], n: int | None, seed: int = 0) -> list[dict[str, Any]]:
    if not n or n >= len(queries):
        return queries
    idx = sorted(random.Random(seed).sample(range(len(queries)), n))
    return [queries[i] for i in idx]


def run(args: argparse.Namespace) -> dict[str, Any]:
    es = EvalSet.load(args.data)
    km = make_kemem(args.prefix, variant=args.variant)
    print(
        f"{es.name}: {len(es.docs)} docs, {len(es.queries)} queries, "
        f"{sum(len(v) for v in es.qrels.values())} gold links",
        file=sys.stderr,
    )
    extra = json.loads(args.set) if args.set else {}
    result: dict[str, Any] = {
        "eval_set": es.name,
        "data": str(args.data),
        "docs": len(es.docs),
        "queries_total": len(es.queries),
        "keywords": args.keywords,
        "model_variant": args.variant,
        "modes": {k: {"mode": m, "expand": e} for k, (m, e) in MODES.items()},
        "settings": "limit=10, score_threshold=0, entity_limit=0, now=query timestamp",
        "overrides": extra,
    }
    with eval_indices(km, args.reuse, args.keep) as fresh:
        if fresh:
            km.init()
        texts = [d["text"] for d in es.docs]
        vecs = embeddings(km, texts, args.variant)
        files = sorted({source_file(d["namespace"]) for d in es.docs})
        pooled_files = set(files) if not args.pooled_files else set(args.pooled_files)
        per_ns, pooled = build_records(km, es, vecs, args.keywords, pooled_files)
        if fresh:
            result["index_per_namespace"] = index_all(km, per_ns, "per-namespace")
            if not args.no_pooled:
                result["index_pooled"] = index_all(km, pooled, "pooled-by-file")
        modes = [m for m in MODES if not args.modes or m in args.modes]
        qs = sample(es.queries, args.limit_queries)

        def all_modes(queries: list, pooled: bool, label: str) -> dict[str, Any]:
            out = {}
            for name in modes:
                mode, expand = MODES[name]
                out[name] = run_mode(km, es, queries, mode, expand, pooled, args.workers, extra)
                print(f"  {label:13s} {name:16s} {_line(out[name])}", file=sys.stderr)
            return out

        result["per_namespace"] = all_modes(qs, False, "per-namespace")
        if not args.no_pooled:
            pq = [q for q in es.queries if source_file(q["namespace"]) in pooled_files]
            pq = sample(pq, args.pooled_limit_queries or args.limit_queries, seed=1)
            result["pooled_files"] = sorted(pooled_files)
            result["pooled"] = all_modes(pq, True, "pooled")
    result["stamp"] = stamp(km)
    return result


def _line(r: dict[str, Any]) -> str:
    return " ".join(f"{m}={r[m]:.3f}" for m in METRICS) + f" n={r['n']} ({r['wall_s']}s)"


def markdown(result: dict[str, Any]) -> str:
    lines = []
    for setting in ("per_namespace", "pooled"):
        table = result.get(setting)
        if not table:
            continue
        n = next(iter(table.values()))["n"]
        title = "per namespace" if setting == "per_namespace" else "pooled by source file"
        lines += [
            f"**{result['eval_set']} — {title}** ({n} queries)",
            "",
            "| method | R@1 | R@5 | R@10 | nDCG@10 | MRR | p50 ms | p99 ms |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, r in table.items():
            lat = r["latency_ms"]
            lines.append(
                f"| {name} | {r['recall@1']:.3f} | {r['recall@5']:.3f} | {r['recall@10']:.3f} "
                f"| {r['ndcg@10']:.3f} | {r['mrr']:.3f} | {lat.get('p50', 0):.1f} "
                f"| {lat.get('p99', 0):.1f} |"
            )
        lines.append("")
        types = sorted({t for r in table.values() for t in r["by_type_ndcg@10"]})
        if len(types) > 1:
            lines += [
                "nDCG@10 by question type:",
                "",
                "| method | " + " | ".join(types) + " |",
                "|---|" + "---|" * len(types),
            ]
            for name, r in table.items():
                vals = " | ".join(f"{r['by_type_ndcg@10'].get(t, 0):.3f}" for t in types)
                lines.append(f"| {name} | {vals} |")
            lines.append("")
        if setting == "per_namespace":
            leaks = sum(r["namespace_leaks"] for r in table.values())
            lines += [f"Hits from another namespace (per-user filter check): {leaks}", ""]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="dir with corpus/queries/qrels")
    p.add_argument("--limit-queries", type=int, default=None, help="seeded sample of queries")
    p.add_argument("--pooled-limit-queries", type=int, default=None)
    p.add_argument("--pooled-files", nargs="*", default=None, help="source files to pool")
    p.add_argument("--no-pooled", action="store_true", help="skip the pooled stress test")
    p.add_argument("--modes", nargs="*", default=None, choices=list(MODES))
    p.add_argument("--keywords", choices=["tfidf", "none"], default="tfidf")
    p.add_argument("--variant", choices=["auto", "int8", "int8-channel", "fp32"], default="auto")
    p.add_argument("--workers", type=int, default=2, help="concurrent query threads")
    p.add_argument("--prefix", default="bench-memdaily")
    p.add_argument("--keep", action="store_true", help="keep the indices afterwards")
    p.add_argument("--reuse", action="store_true", help="indices kept by --keep: query only")
    p.add_argument("--set", default="", help="JSON of extra query options (QueryParams)")
    p.add_argument("--out", type=Path, default=None, help="write the JSON result here")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(parser, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
