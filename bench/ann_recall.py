"""ANN recall against exact scoring, and a quantised copy of a kept benchmark store.

    python -m bench.ann_recall copy --src bench-lat-ab-100000 --dst bench-lat-ab-100000q
    python -m bench.ann_recall recall --prefix bench-lat-ab-100000 [--prefix ...q] [--queries 100]

``copy`` re-indexes the four memory indices of a kept store (``bench.latency_ab build`` or
``bench.latency --keep``) on the engine itself into indices whose vectors are int8-quantised
(``KEMEM_VECTOR_QUANTIZATION=int8``'s template), force-merged like the source: the same
documents, no client-side cost. History and users indices are shared by alias.

``recall`` embeds the benchmark's query texts and, per scope (the heavy user's events in the
user db; the agent's whole official db), compares the engine's ``knn`` query (filter = scope)
with the exact cosine top 10 (a ``script_score`` over every memory in scope):

- recall@10: |ANN top 10 ∩ exact top 10| / 10 (``k=10``);
- cand@10: the share of the exact top 10 among the ``k=50`` ANN neighbours, which is what the
  approximate path rescores (``QueryParams.ann_k`` = 50);
- ANN and exact ``took`` medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench import latency as lat
from bench.common import make_kemem, stamp
from kemem_es.store.layout import history_alias, index_alias, users_alias
from kemem_es.store.scope import Scope
from kemem_es.store.templates import concrete_index, index_body

# knn_score (cosinesimil) scores 1 + cos: a hit this close in cosine to the exact 10th counts as
# found in `near_recall@10`
NEAR_COS = 0.01

SCOPES = {
    "user (heavy user)": Scope.of(agent_id="a1", user_id="u00000"),
    "official (agent)": Scope.of(agent_id="a1", db="official"),
}


def copy_store(args: argparse.Namespace) -> dict[str, Any]:
    src = make_kemem(args.src)
    eng = src.engine
    out: dict[str, Any] = {"src": args.src, "dst": args.dst, "quantization": args.quantization}
    for db in ("user", "official"):
        for kind in ("events", "entities"):
            s_alias = index_alias(args.src, db, kind)
            d_alias = index_alias(args.dst, db, kind)
            d_index = concrete_index(args.dst, db, kind)
            if eng.index_exists(d_alias):
                for name in eng.get_index(d_alias):
                    eng.delete_index(name)
            (spec,) = eng.get_index(s_alias).values()
            shards = int(spec["settings"]["index"]["number_of_shards"])  # the source's layout
            body = index_body(kind, eng.dialect, src.embedder.dim, args.quantization, shards)
            body["settings"] = {**body["settings"], "index.refresh_interval": "-1"}
            eng.create_index(d_index, {**body, "aliases": {d_alias: {"is_write_index": True}}})
            t0 = time.perf_counter()
            _copy_docs(eng, s_alias, d_index)
            secs = time.perf_counter() - t0
            eng.client.indices.put_settings(
                index=d_index, body={"index": {"refresh_interval": None}}
            )
            t1 = time.perf_counter()
            eng.client.indices.forcemerge(index=d_index, max_num_segments=1, request_timeout=7200)
            eng.refresh(d_alias)
            n = eng.count(d_alias)
            out[f"{db}_{kind}"] = {
                "docs": n,
                "reindex_s": round(secs, 1),
                "docs_per_s": round(n / secs, 1),
                "merge_s": round(time.perf_counter() - t1, 1),
            }
            print(f"  {d_alias}: {out[f'{db}_{kind}']}", file=sys.stderr)
    for alias_of in (history_alias, users_alias):
        s, d = alias_of(args.src), alias_of(args.dst)
        if not eng.index_exists(d):
            actions = [{"add": {"index": n, "alias": d}} for n in eng.get_index(s)]
            eng.update_aliases(actions)
    out["stamp"] = stamp(src)
    return out


def _copy_docs(eng: Any, src: str, dst: str, batch: int = 1000) -> None:
    """Every document of ``src`` into ``dst``: ids by search_after, sources (vectors included)
    by mget, two bulks in flight. (Not ``_reindex``: on OpenSearch 3.5 with the k-NN plugin a
    search that fetches a knn_vector in ``_source`` fails with "all shards failed", and reindex
    reads through such searches; mget is not affected.)"""
    from concurrent.futures import ThreadPoolExecutor

    after: list[Any] | None = None
    pending: list[Any] = []
    with ThreadPoolExecutor(2) as pool:
        while True:
            # uid: unique, so search_after pages every document once also across shards
            # (``_doc`` order is per shard: over 8 shards it skipped ~1 in 40,000)
            body: dict[str, Any] = {"size": batch, "_source": False, "sort": ["uid"]}
            if after is not None:
                body["search_after"] = after
            hits = eng.client.search(index=src, body=body, request_timeout=600)["hits"]["hits"]
            if not hits:
                break
            after = hits[-1]["sort"]
            # routed documents carry their routing: it is how mget and bulk find their shard
            refs = [{"_id": h["_id"]} | _routed(h) for h in hits]
            docs = eng.client.mget(index=src, body={"docs": refs})["docs"]
            lines: list[dict[str, Any]] = []
            for d in docs:
                meta = {"_index": dst, "_id": d["_id"]} | _routed(d)
                lines += [{"index": meta}, d["_source"]]
            while len(pending) >= 2:
                pending.pop(0).result()
            pending.append(pool.submit(eng.client.bulk, body=lines, request_timeout=600))
        for job in pending:
            job.result()


def _routed(hit: dict[str, Any]) -> dict[str, Any]:
    return {"routing": hit["_routing"]} if "_routing" in hit else {}


def exact_body(vector: list[float], filters: list[dict[str, Any]], k: int) -> dict[str, Any]:
    return {
        "size": k,
        "_source": False,
        "track_total_hits": False,
        "query": {
            "script_score": {
                "query": {"bool": {"filter": filters}},
                "script": {
                    "lang": "knn",
                    "source": "knn_score",
                    "params": {
                        "field": "vector",
                        "query_value": vector,
                        "space_type": "cosinesimil",
                    },
                },
            }
        },
    }


def ann_body(engine: Any, vector: list[float], filters: list[dict[str, Any]], k: int) -> dict:
    return {"size": k, "_source": False, "query": engine.ann_query("vector", vector, k, filters)}


def _ids(resp: dict[str, Any]) -> set[str]:
    return {h["_id"] for h in resp["hits"]["hits"]}


def recall(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"queries": args.queries, "prefixes": {}}
    km = None
    for prefix in args.prefix:
        km = make_kemem(prefix)
        texts = lat.scale.queries(args.queries, args.seed + 4)
        vectors = [km.embedder.embed_one(t).round(5).tolist() for t in texts]
        res: dict[str, Any] = {}
        for label, scope in SCOPES.items():
            alias = index_alias(prefix, scope.db, "events")
            filters = scope.filters()
            r10, c50, s10, t_ann, t_ann50, t_exact = [], [], [], [], [], []
            near10: list[float] = []
            gap10: list[float] = []
            # as the searcher asks: the scope's shard only (what a routed store holds there)
            search = partial(km.engine.search, alias, routing=scope.routing)
            for vec in vectors:
                exact = search(exact_body(vec, filters, 10))
                ann = search(ann_body(km.engine, vec, filters, 10))
                ann50 = search(ann_body(km.engine, vec, filters, 50))
                want = _ids(exact)
                r10.append(len(want & _ids(ann)) / max(len(want), 1))
                c50.append(len(want & _ids(ann50)) / max(len(want), 1))
                # Ties: the synthetic corpus holds ~N/2048 near-copies of each pool vector, so
                # "the" exact top 10 is one pick among equals. Score recall counts an ANN hit
                # that scores at least the exact 10th (exactly rescored) as found.
                hits = exact["hits"]["hits"]
                if hits:
                    tenth = hits[-1]["_score"] - 1e-6
                    ids_f = [{"ids": {"values": list(_ids(ann))}}]
                    got = search(exact_body(vec, ids_f, 10))["hits"]["hits"]
                    s10.append(sum(h["_score"] >= tenth for h in got) / len(hits))
                    # Near-ties: copies of one pool vector differ by their noise (~0.01 of
                    # cosine), so at 1M "the" top 10 is ten lucky draws among ~500 copies.
                    # What a reader loses is cosine: count a hit within NEAR_COS of the exact
                    # 10th as found, and report the mean cosine the ANN's top 10 gives up.
                    near10.append(sum(h["_score"] >= tenth - NEAR_COS for h in got) / len(hits))
                    want_mean = statistics.mean(h["_score"] for h in hits)
                    got_scores = [h["_score"] for h in got] + [0.0] * (len(hits) - len(got))
                    gap10.append(want_mean - statistics.mean(got_scores[: len(hits)]))
                t_exact.append(exact["took"])
                t_ann.append(ann["took"])
                t_ann50.append(ann50["took"])
            res[label] = {
                "recall@10": round(statistics.mean(r10), 4),
                "score_recall@10": round(statistics.mean(s10), 4) if s10 else None,
                "near_recall@10": round(statistics.mean(near10), 4) if near10 else None,
                "cos_gap@10": round(statistics.mean(gap10), 4) if gap10 else None,
                "cand@10_in_ann50": round(statistics.mean(c50), 4),
                "ann10_took_ms_p50": statistics.median(t_ann),
                "ann50_took_ms_p50": statistics.median(t_ann50),
                "exact_took_ms_p50": statistics.median(t_exact),
            }
            print(f"  {prefix} {label}: {res[label]}", file=sys.stderr)
        stats = km.engine.client.indices.stats(index=f"{prefix}-*-events", metric="store")
        res["events_store_mb"] = {
            name.rsplit("-", 2)[0]: round(s["primaries"]["store"]["size_in_bytes"] / 2**20, 1)
            for name, s in stats["indices"].items()
        }
        out["prefixes"][prefix] = res
    out["stamp"] = stamp(km)
    return out


def markdown(result: dict[str, Any]) -> str:
    if "src" in result:
        return "```\n" + json.dumps(result, ensure_ascii=False, indent=1) + "\n```"
    lines = [
        f"ANN recall on {result['queries']} query vectors (exact = script_score over the scope)",
        "",
        "| store | scope | recall@10 (k=10) | score recall@10 | within 0.01 cos | cos given up | "
        "exact top 10 in ANN k=50 | ANN k=10 ms | ANN k=50 ms | exact ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for prefix, res in result["prefixes"].items():
        for label in SCOPES:
            r = res[label]
            lines.append(
                f"| {prefix} | {label} | {r['recall@10']} | {r['score_recall@10']} | "
                f"{r.get('near_recall@10')} | {r.get('cos_gap@10')} | "
                f"{r['cand@10_in_ann50']} | "
                f"{r['ann10_took_ms_p50']} | {r['ann50_took_ms_p50']} | {r['exact_took_ms_p50']} |"
            )
    lines.append("")
    for prefix, res in result["prefixes"].items():
        lines.append(f"- {prefix} events store MB: {res['events_store_mb']}")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    c = sub.add_parser("copy")
    c.add_argument("--src", required=True)
    c.add_argument("--dst", required=True)
    c.add_argument("--quantization", default="int8", choices=["none", "int8"])
    c.add_argument("--out", type=Path)
    r = sub.add_parser("recall")
    r.add_argument("--prefix", action="append", required=True)
    r.add_argument("--queries", type=int, default=100)
    r.add_argument("--seed", type=int, default=7)
    r.add_argument("--out", type=Path)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    result = copy_store(args) if args.action == "copy" else recall(args)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=2))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
