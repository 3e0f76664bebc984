"""Query latency per stage, query QPS and indexing throughput on synthetic memories.

    python -m bench.latency --scale 10000 [--scale 100000] [--queries 200 --warmup 20]

At scale N the user db holds N events (one heavy user, u00000, holds min(20k, N/2); the rest
spread over 1,000 users) + N/5 entities, and the official db the same again (the large scope).
Vectors come from a cached pool of real embeddings of generated texts (plus small noise), so
indexing stays fast; throughput with embedding is measured on a small slice separately.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from bench import scale
from bench.common import (
    DBS,
    KINDS,
    WORK,
    cli_main,
    drop_indices,
    engine_settings,
    make_kemem,
    percentiles,
    stage_table,
    stamp,
)

POOL_SIZE = 2048
QUERY_OPTS: dict[str, Any] = {"limit": 10, "score_threshold": 0.0}
SCENARIOS: dict[str, dict[str, Any]] = {
    # the heavy user's own scope (exact scoring) + the official db on the auto path
    "per_user": {"user_id": "u00000", "path": "auto"},
    # a light user: the official db (size N) dominates; approximate (ANN ∪ BM25) vs exact
    "large_approx": {"user_id": "u00001", "path": "approx"},
    "large_exact": {"user_id": "u00001", "path": "exact"},
}


def vector_pool(km: Any, variant: str, seed: int) -> np.ndarray:
    path = WORK / f"pool-{variant}-{POOL_SIZE}-{seed}.npy"
    if path.exists():
        return np.load(path)
    texts = [r["description"] for b in scale.events(POOL_SIZE, seed + 99) for r in b]
    vecs = km.embedder.embed(texts).astype(np.float32)
    WORK.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def _with_vectors(batch: list[dict], pool: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    idx = rng.integers(0, len(pool), len(batch))
    vecs = pool[idx] + rng.normal(0, 0.01, (len(batch), pool.shape[1])).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def share_official(km: Any, source: str) -> None:
    """Make ``km``'s official indices aliases of another prefix's (already loaded) official
    indices: an A/B of user-db layouts then loads only the user db, over the same official
    data."""
    from kemem_es.store.layout import index_alias

    engine = km.engine
    for kind in KINDS:
        mine = index_alias(km.settings.index_prefix, "official", kind)
        theirs = index_alias(source, "official", kind)
        for name in list(engine.get_index(mine)):
            engine.delete_index(name)  # the empty index init just made
        names = list(engine.get_index(theirs))
        engine.update_aliases([{"add": {"index": n, "alias": mine}} for n in names])


def load_corpus(
    km: Any,
    n: int,
    seed: int,
    pool: np.ndarray,
    dbs: Sequence[str] = DBS,
    per_call: int = scale.BATCH,
) -> dict[str, Any]:
    """Index N events + N/5 entities into each db; only index_records time is counted.
    ``per_call`` records go into each ``index_records`` call: a call of at least the bulk
    writer's large-load size pauses the index's periodic refresh (one segment per call instead
    of one a second), as an application's import of a large file does."""
    from kemem_es import EntityRecord, EventRecord

    heavy = min(20_000, n // 2)
    n_ent = n // 5
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {"events_per_db": n, "entities_per_db": n_ent, "heavy_user": heavy}
    plan = [
        ("user", "events", scale.events(n, seed, "user", heavy), EventRecord),
        ("user", "entities", scale.entities(n_ent, seed, "user", n_ent // 2), EntityRecord),
        ("official", "events", scale.events(n, seed + 2, "official"), EventRecord),
        ("official", "entities", scale.entities(n_ent, seed + 2, "official"), EntityRecord),
    ]
    for db, kind, gen, cls in plan:
        if db not in dbs:
            continue
        secs = 0.0
        written = rejected = 0
        for batch in _grouped(gen, per_call):
            vecs = _with_vectors(batch, pool, rng).round(6)
            recs = [cls(**r, vector=v.tolist()) for r, v in zip(batch, vecs, strict=True)]
            t0 = time.perf_counter()
            rep = km.index_records(recs, kind=kind, db=db)
            secs += time.perf_counter() - t0
            written += rep.indexed + rep.updated + rep.unchanged
            rejected += len(rep.rejected)
        out[f"{db}_{kind}"] = {
            "docs": written,
            "rejected": rejected,
            "seconds": round(secs, 2),
            "docs_per_s": round(written / secs, 1) if secs else None,
        }
        print(f"  indexed {db} {kind}: {written} in {secs:.1f}s", file=sys.stderr)
    return out


def _grouped(gen: Iterable[list[dict[str, Any]]], size: int) -> Iterator[list[dict[str, Any]]]:
    """The generator's batches regrouped into lists of ``size`` records (the last may be short)."""
    buf: list[dict[str, Any]] = []
    for batch in gen:
        buf.extend(batch)
        while len(buf) >= size:
            yield buf[:size]
            buf = buf[size:]
    if buf:
        yield buf


def force_merge(km: Any, segments: int) -> dict[str, Any]:
    """Merge each index down to ``segments`` (0: leave them as bulk loading left them). A store
    that is written continuously sits in between: background merges keep tens of segments."""
    from kemem_es.store.layout import index_alias

    out: dict[str, Any] = {"max_num_segments": segments}
    for db in DBS:
        for kind in KINDS:
            alias = index_alias(km.settings.index_prefix, db, kind)
            if segments:
                t0 = time.perf_counter()
                km.engine.client.indices.forcemerge(
                    index=alias, max_num_segments=segments, request_timeout=3600
                )
                out[f"{db}_{kind}_merge_s"] = round(time.perf_counter() - t0, 1)
            km.engine.refresh(alias)  # searchers see the merged segment only after a refresh
            stats = km.engine.client.indices.stats(index=alias, metric="segments")
            out[f"{db}_{kind}_segments"] = stats["_all"]["primaries"]["segments"]["count"]
    print(f"  merge: {out}", file=sys.stderr)
    return out


def _loaded(km: Any, n: int) -> bool:
    """The prefix already holds this scale's corpus (``--reuse``: measure a kept store again)."""
    from kemem_es.store.layout import index_alias

    try:
        return all(
            km.engine.count(index_alias(km.settings.index_prefix, db, "events")) >= n for db in DBS
        )
    except Exception:
        return False


def shard_counts(km: Any) -> dict[str, int]:
    """Primary shards of each events index, as the engine has them."""
    from kemem_es.store.layout import index_alias

    out = {}
    for db in DBS:
        (spec,) = km.engine.get_index(index_alias(km.settings.index_prefix, db, "events")).values()
        out[db] = int(spec["settings"]["index"]["number_of_shards"])
    return out


def segment_counts(km: Any) -> dict[str, int]:
    from kemem_es.store.layout import index_alias

    out = {}
    for db in DBS:
        for kind in KINDS:
            alias = index_alias(km.settings.index_prefix, db, kind)
            stats = km.engine.client.indices.stats(index=alias, metric="segments")
            out[f"{db}_{kind}"] = stats["_all"]["primaries"]["segments"]["count"]
    return out


def engine_cpu_ms(km: Any) -> float:
    """CPU milliseconds the engine's processes have used so far: read from /proc when the
    node runs on this machine (exact), else the node stats (refreshed only once a second)."""
    info = km.engine.client.nodes.info(metric="process")["nodes"].values()
    total = 0.0
    for node in info:
        proc = Path(f"/proc/{node['process']['id']}")
        cmdline = (proc / "cmdline").read_bytes() if proc.exists() else b""
        if b"opensearch" not in cmdline.lower() and b"elasticsearch" not in cmdline.lower():
            stats = km.engine.client.nodes.stats(metric="process")["nodes"].values()
            return float(sum(n["process"]["cpu"]["total_in_millis"] for n in stats))
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        total += 1000 * (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def throughput(seed: int, n: int = 1000) -> dict[str, Any]:
    """Indexing docs/s on a fresh slice of n events: int8 / fp32 embedding, vectors supplied."""
    from kemem_es import EventRecord

    records = [r for b in scale.events(n, seed + 5, "user", 0, 50) for r in b]
    out: dict[str, Any] = {"slice_docs": n}
    pool = None
    for label, variant in (("int8_embed", "int8"), ("fp32_embed", "fp32"), ("vectors", "int8")):
        km = make_kemem(f"bench-tp-{label.replace('_', '-')}", variant=variant)
        drop_indices(km)
        km.init()
        km.embedder.embed(["预热"])  # load the model and jieba outside the timed part
        km.tokenizer.index_text("预热")
        if label == "vectors":
            pool = vector_pool(km, "int8", seed)
            vecs = _with_vectors(records, pool, np.random.default_rng(seed)).round(6)
            recs = [EventRecord(**r, vector=v.tolist()) for r, v in zip(records, vecs, strict=True)]
        else:
            recs = [EventRecord(**r) for r in records]
        c0, e0, t0 = time.process_time(), engine_cpu_ms(km), time.perf_counter()
        rep = km.index_records(recs, kind="events", db="user")
        secs = time.perf_counter() - t0
        client_ms, engine_ms = time.process_time() - c0, engine_cpu_ms(km) - e0
        out[label] = {
            "docs": rep.indexed,
            "seconds": round(secs, 2),
            "docs_per_s": round(n / secs),
            # CPU per document (client: this process; engine: the node's process), which a
            # shared machine's load disturbs less than the wall clock: where the time goes.
            "client_cpu_ms_per_doc": round(1000 * client_ms / n, 3),
            "engine_cpu_ms_per_doc": round(engine_ms / n, 3),
        }
        print(
            f"  throughput {label}: {n / secs:.0f} docs/s, CPU ms/doc client "
            f"{1000 * client_ms / n:.3f} engine {engine_ms / n:.3f}",
            file=sys.stderr,
        )
        drop_indices(km)
    return out


def run_queries(km: Any, texts: Sequence[str], opts: dict[str, Any]) -> list[dict[str, float]]:
    return [
        dict(km.query(t, agent_id="a1", **QUERY_OPTS, **opts).additional_info.timings_ms)
        for t in texts
    ]


def event_requests(
    km: Any, texts: Sequence[str], scenarios: Sequence[str] = tuple(SCENARIOS)
) -> list[tuple[str, Any]]:
    """(scenario, (index, body, routing)) of each event request the scenarios send for
    ``texts``: to time one request in variants, the rest of the pipeline left out."""
    send = km.engine.msearch
    captured: list[tuple[str, Any]] = []
    try:
        for name in scenarios:

            def capture(searches: Any, name: str = name) -> Any:
                captured.extend((name, s) for s in searches if "events" in s[0])
                return send(searches)

            km.engine.msearch = capture
            run_queries(km, texts, SCENARIOS[name])
    finally:
        km.engine.msearch = send
    return captured


def qps(km: Any, texts: Sequence[str], opts: dict[str, Any], threads: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as ex:
        timings = list(
            ex.map(
                lambda t: km.query(t, agent_id="a1", **QUERY_OPTS, **opts).additional_info,
                texts,
            )
        )
    wall = time.perf_counter() - t0
    return {
        "threads": threads,
        "queries": len(texts),
        "qps": round(len(texts) / wall, 1),
        "total_ms": percentiles(t.timings_ms["total"] for t in timings),
    }


class LiveWriter:
    """Writes new events (vectors supplied, default refresh, no force-merge) into the user db
    at about ``rate`` docs/s in the background: the store of a service that is being written
    while it answers queries."""

    def __init__(self, km: Any, pool: np.ndarray, rate: float, seed: int) -> None:
        self.km, self.pool, self.rate, self.seed = km, pool, rate, seed
        self.written = 0
        self.seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-writer", daemon=True)

    def __enter__(self) -> LiveWriter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        from kemem_es import EventRecord

        rng = np.random.default_rng(self.seed)
        batch = max(int(self.rate), 1)  # about one bulk a second, like a steady stream
        start = time.perf_counter()
        for recs in scale.events(10_000_000, self.seed, "user", 0, 1000, batch):
            if self._stop.is_set():
                break
            vecs = _with_vectors(recs, self.pool, rng).round(6)
            items = [
                EventRecord(**{**r, "id": "live-" + r["id"]}, vector=v.tolist())
                for r, v in zip(recs, vecs, strict=True)
            ]
            rep = self.km.index_records(items, kind="events", db="user")
            self.written += rep.indexed + rep.updated
            ahead = self.written / self.rate - (time.perf_counter() - start)
            if ahead > 0:
                self._stop.wait(ahead)
        self.seconds = time.perf_counter() - start

    def report(self) -> dict[str, Any]:
        rate = self.written / self.seconds if self.seconds else 0.0
        return {"target_docs_per_s": self.rate, "written": self.written, "docs_per_s": round(rate)}


def measure(km: Any, args: argparse.Namespace, pool: np.ndarray | None = None) -> dict[str, Any]:
    if args.write_rate and pool is not None:
        with LiveWriter(km, pool, args.write_rate, args.seed + 50) as writer:
            out = _measure(km, args)
        out["live_writes"] = writer.report()
        print(f"  live writes: {out['live_writes']}", file=sys.stderr)
        return out
    return _measure(km, args)


def _measure(km: Any, args: argparse.Namespace) -> dict[str, Any]:
    texts = scale.queries(args.warmup + args.queries, args.seed + 4)
    warm, measured = texts[: args.warmup], texts[args.warmup :]
    out: dict[str, Any] = {}
    if args.scenarios is None or "chat" in args.scenarios:
        chat_measure(km, warm, SCENARIOS["per_user"])
        out["chat"] = chat_measure(km, measured, SCENARIOS["per_user"])
        for name in CHAT_VARIANTS:
            st = out["chat"][name]
            print(
                f"  chat/{name}: total p50={st['total']['p50']} (×{st['ratio_p50']}) "
                f"embed p50={st['embed']['p50']} tokenise p50={st['tokenise']['p50']} "
                f"search_events p50={st['search_events']['p50']}",
                file=sys.stderr,
            )
    for name, opts in SCENARIOS.items():
        if args.scenarios and name not in args.scenarios:
            continue
        run_queries(km, warm, opts)
        timings = run_queries(km, measured, opts)
        res = {"options": {**QUERY_OPTS, **opts}, "stages_ms": stage_table(timings)}
        if args.threads:
            res["qps"] = qps(km, measured, opts, args.threads)
        out[name] = res
        st = res["stages_ms"]["total"]
        q = res.get("qps", {}).get("qps")
        print(
            f"  {name}: total p50={st['p50']} p95={st['p95']} p99={st['p99']} ms; "
            f"search_events p50={res['stages_ms']['search_events']['p50']}; "
            f"{q} qps @ {args.threads} threads",
            file=sys.stderr,
        )
    return out


# A chat turn with earlier turns (issue 39): the same utterances, each with the CHAT_TURNS turns
# before it in a rolling conversation, on the per_user scope: the user's turns are the earlier
# utterances (each was queried as the utterance before), and the agent's reply to utterance j is
# the same text in every context that holds it (drawn from the same generator). Measured
# interleaved with the bare utterance: joint window (the default); the earlier-turns window cold
# (computed in the query's model call) and prepared (Kemem.prepare_context after the agent's
# reply, untimed); the per-turn window ("turns"), as a chat app that only queries sends it (its
# newest agent reply embedded in the query's model call, every other turn cached) and prepared
# (prepare_context after the reply, untimed: the query embeds its utterance alone). The two
# "turns" variants talk in conversations of their own (different agent replies), so one does
# not prepare the other's. "split" (the earlier window and the utterance recombined by tokens)
# cold and prepared, on contexts of their own.
CHAT_TURNS = 6
AGENT_REPLIES = (
    "嗯嗯，我记得你说过{}，后来怎么样了？",
    "听起来{}对你很重要呢。",
    "那{}之后你感觉好些了吗？",
)
# the prepared "turns" conversation's replies: as long, other words
PREPARED_REPLIES = (
    "好的，我记下了你说的{}，然后呢？",
    "原来{}对你这么重要啊。",
    "那{}以后心情好一点没有？",
)
CHAT_VARIANTS = (
    "bare",
    "chat_joint",
    "chat_earlier_cold",
    "chat_earlier_prepared",
    "chat_turns",
    "chat_turns_prepared",
    "chat_split_cold",
    "chat_split_prepared",
)


def chat_contexts(
    texts: Sequence[str], turns: int = CHAT_TURNS, replies: Sequence[str] = AGENT_REPLIES
) -> list[str]:
    """For text i, its ``turns`` earlier turns as lines, oldest first (user and agent): the
    user's turn j is text j, the agent's reply to it depends on j alone (a rolling
    conversation: context i+1 is context i without its oldest exchange, plus exchange i)."""
    out = []
    for i in range(len(texts)):
        lines = []
        for k in range(turns // 2, 0, -1):
            j = (i - k) % len(texts)
            said = texts[j]
            lines.append(f"用户：{said}")
            lines.append(f"助手：{replies[j % len(replies)].format(said[-6:])}")
        out.append("\n".join(lines))
    return out


def chat_measure(km: Any, texts: Sequence[str], opts: dict[str, Any]) -> dict[str, Any]:
    """Per-stage timings of the bare utterance and the chat variants, interleaved per query."""
    contexts = chat_contexts(texts)
    prepared = chat_contexts(texts, replies=PREPARED_REPLIES)
    variants: dict[str, list[dict[str, float]]] = {name: [] for name in CHAT_VARIANTS}
    base = {**QUERY_OPTS, **opts}

    def timed(name: str, text: str, **extra: Any) -> None:
        resp = km.query(text, agent_id="a1", **base, **extra)
        variants[name].append(dict(resp.additional_info.timings_ms))

    for i, (text, ctx, ctx_p) in enumerate(zip(texts, contexts, prepared, strict=True)):
        runs = [("bare", {}), ("chat_joint", {"context": ctx})]
        for name, extra in runs if i % 2 else runs[::-1]:
            timed(name, text, **extra)
        timed("chat_earlier_cold", text, context=ctx, context_vector="earlier")
        # a new conversation state: the prepared run must not reuse the cold run's vector
        ctx2 = ctx + "\n助手：嗯，我在听。"
        km.prepare_context(ctx2, context_vector="earlier")  # the app, after its reply: untimed
        timed("chat_earlier_prepared", text, context=ctx2, context_vector="earlier")
        timed("chat_turns", text, context=ctx, context_vector="turns")
        km.prepare_context(ctx_p, context_vector="turns")  # after the agent's reply: untimed
        timed("chat_turns_prepared", text, context=ctx_p, context_vector="turns")
        # "split": the earlier window as "earlier" (contexts of their own: none prepared by
        # the runs above) and the utterance, recombined by tokens
        timed("chat_split_cold", text, context=ctx + "\n助手：嗯嗯。", context_vector="split")
        ctx3 = ctx + "\n助手：好的，我在。"
        km.prepare_context(ctx3, context_vector="split")  # after the agent's reply: untimed
        timed("chat_split_prepared", text, context=ctx3, context_vector="split")
    out: dict[str, Any] = {"context_turns": CHAT_TURNS, "options": base}
    for name, timings in variants.items():
        out[name] = stage_table(timings)
    bare = out["bare"]["total"]["p50"]
    for name in variants:
        out[name]["ratio_p50"] = round(out[name]["total"]["p50"] / bare, 3) if bare else None
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"scales": {}}
    km = None
    if not args.no_throughput:
        result["throughput"] = throughput(args.seed, args.throughput_docs)
    for n in args.scale:
        km = make_kemem(args.prefix.format(n=n))
        pool = vector_pool(km, "int8", args.seed)
        print(f"scale {n}", file=sys.stderr)
        reuse = args.reuse and _loaded(km, n)
        if not reuse:
            drop_indices(km)
            km.init()
            if args.share_official:
                share_official(km, args.share_official.format(n=n))
        try:
            dbs = ("user",) if args.share_official else DBS
            entry: dict[str, Any] = (
                {"indexing": {"reused": km.settings.index_prefix}}
                if reuse
                else {"indexing": load_corpus(km, n, args.seed, pool, dbs, args.per_call)}
            )
            entry["shards"] = shard_counts(km)
            entry["merge"] = {} if reuse else force_merge(km, args.merge_segments)
            entry["segments"] = segment_counts(km)
            entry["engine"] = engine_settings(km)
            entry["scenarios"] = measure(km, args, pool)
            entry["engine_after"] = engine_settings(km)
        finally:
            if not args.keep and not args.reuse:
                drop_indices(km)
        result["scales"][str(n)] = entry
    result["queries"] = {"measured": args.queries, "warmup": args.warmup, "seed": args.seed}
    result["stamp"] = stamp(km)
    return result


def _merge_note(merge: dict[str, Any]) -> str:
    if not merge:
        return ""
    segs = ", ".join(
        f"{k[:-9]} {v}" for k, v in merge.items() if k.endswith("_segments") and k[0] != "m"
    )
    if merge.get("max_num_segments"):
        secs = sum(v for k, v in merge.items() if k.endswith("_merge_s"))
        return f"Force-merged to {merge['max_num_segments']} segment(s) in {secs:.0f} s ({segs})."
    return f"Segments as loaded: {segs}."


def markdown(result: dict[str, Any]) -> str:
    lines = []
    tp = result.get("throughput")
    if tp:
        lines += [
            f"**Indexing throughput** (slice of {tp['slice_docs']} events, one bulk client)",
            "",
            "| path | docs/s | client CPU ms/doc | engine CPU ms/doc |",
            "|---|---|---|---|",
        ]
        keys = ("int8_embed", "fp32_embed", "vectors")
        lines += [
            f"| {k} | {tp[k]['docs_per_s']} | {tp[k].get('client_cpu_ms_per_doc', '–')} "
            f"| {tp[k].get('engine_cpu_ms_per_doc', '–')} |"
            for k in keys
        ]
        lines.append("")
    for n, entry in result["scales"].items():
        ix = entry["indexing"]
        bulk = ", ".join(f"{k} {v['docs_per_s']}/s" for k, v in ix.items() if isinstance(v, dict))
        head = (
            f"**Scale {int(n):,}** — the kept store `{ix['reused']}` measured again"
            if "reused" in ix
            else f"**Scale {int(n):,}** — per db {ix['events_per_db']:,} events + "
            f"{ix['entities_per_db']:,} entities; heavy user holds {ix['heavy_user']:,} events. "
            f"Bulk with supplied vectors: {bulk}. {_merge_note(entry.get('merge', {}))}"
        )
        if entry.get("segments"):
            head += f" Segments while measured: {entry['segments']}."
        live = entry["scenarios"].get("live_writes")
        if live:
            head += (
                f" Written meanwhile: {live['written']} events at {live['docs_per_s']} docs/s "
                "(default refresh, no force-merge)."
            )
        lines += [
            head,
            "",
            "| scenario | stage | p50 ms | p95 ms | p99 ms |",
            "|---|---|---|---|---|",
        ]
        scenarios = {k: v for k, v in entry["scenarios"].items() if "stages_ms" in v}
        for name, sc in scenarios.items():
            for stage, p in sc["stages_ms"].items():
                lines.append(f"| {name} | {stage} | {p['p50']} | {p['p95']} | {p['p99']} |")
        chat = entry["scenarios"].get("chat")
        if chat:
            lines += [
                "",
                f"Chat turn with {chat['context_turns']} earlier turns vs the bare utterance "
                "(per_user scope, interleaved per query; p50 ms per stage, × = total / bare):",
                "",
                "| variant | total | × bare | tokenise | expand | embed | search_events |",
                "|---|---|---|---|---|---|---|",
            ]
            for name in CHAT_VARIANTS:
                if name not in chat:  # a report written before the variant existed
                    continue
                st = chat[name]
                cells = " | ".join(
                    str(st[k]["p50"]) for k in ("tokenise", "expand", "embed", "search_events")
                )
                lines.append(f"| {name} | {st['total']['p50']} | {st['ratio_p50']} | {cells} |")
        lines += ["", "| scenario | QPS (threads) | total p50 ms under load | p99 ms |"]
        lines.append("|---|---|---|---|")
        for name, sc in scenarios.items():
            if "qps" not in sc:
                continue
            q = sc["qps"]
            lines.append(
                f"| {name} | {q['qps']} ({q['threads']}) | {q['total_ms']['p50']} "
                f"| {q['total_ms']['p99']} |"
            )
        lines.append("")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=int, nargs="*", default=[10_000], help="none: throughput only")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-throughput", action="store_true")
    p.add_argument("--throughput-docs", type=int, default=5000, help="size of the indexing slice")
    p.add_argument("--keep", action="store_true", help="keep the indices afterwards")
    p.add_argument(
        "--per-call",
        type=int,
        default=scale.BATCH,
        help="records per index_records call while loading (>= 5000 pauses the periodic refresh)",
    )
    p.add_argument(
        "--merge-segments",
        type=int,
        default=1,
        help="force-merge each index to this many segments after loading (0: don't)",
    )
    p.add_argument(
        "--prefix", default="bench-lat-{n}", help="index prefix ({n}: the scale), bench-*"
    )
    p.add_argument(
        "--reuse",
        action="store_true",
        help="measure the prefix's kept store when it holds the scale (no load, no merge); "
        "never deleted",
    )
    p.add_argument(
        "--write-rate",
        type=float,
        default=0.0,
        help="index this many new events a second into the user db while the queries run",
    )
    p.add_argument(
        "--share-official",
        default=None,
        help="another prefix ({n}: the scale) whose loaded official db this store uses "
        "(aliases; only the user db is loaded): A/B of user-db layouts over the same data",
    )
    p.add_argument("--scenarios", nargs="*", default=None, help="a subset of the scenarios")
    p.add_argument("--out", type=Path, default=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(parser, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
