"""Conversation memory: ``context()`` latency with a 20-turn window, session writes per second
and extraction batches per minute against a loopback chat-completions stub.

    python -m bench.session_context --scale 100000 [--ops 200] [--prefix bench-lat-{n}]
        [--out bench/results/…/session.json]

The store is bench.memory_api's (N synthetic user events under ``--prefix``, default
``bench-mem-{N}``, reused when it holds N; bench.latency's store of the same seed holds the
same user events, so ``--prefix`` may name a kept one of those). Turns are the lines of
bench/session_fallback (cycled). ``context_ms``: one
``Kemem.context`` call (session window read, overview, recall with the window as context,
assembly and token counting) for the heavy user, whose session holds 19 turns (the current
message makes 20), budget 2000 tokens; ``context_parts_ms``: its ``timings_ms`` per part.
``context_before_ms``, interleaved call by call with it: the same call as the code before
2026-11-28 made it — the window and the message embedded together (``context_vector="joint"``)
and the session's state read in a round trip of its own (the process's known state
forgotten); the overview's search runs beside the window read in both. ``query_ms``, also
interleaved: the recall's query by itself (``Kemem.query`` with the window as its context).
``append_ms``: one ``add([user, assistant], session_id=…)`` (two messages, the state, a batch
record every 10 turns). ``batches_per_min``: batches extracted (claim, LLM call to the stub,
answer saved, memories written through the write path with dedup, done) per minute of one
worker thread; the stub answers at once, so this is kemem-es's own cost per batch, not an
LLM's.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.common import cli_main, make_kemem, percentiles, stamp
from bench.memory_api import heavy_scope, load

TURNS = Path(__file__).resolve().parent / "session_fallback"


def lines() -> list[str]:
    out = []
    for name in ("dialogue_30.jsonl", "dev.jsonl"):
        text = (TURNS / name).read_text(encoding="utf-8")
        out += [json.loads(x)["content"] for x in text.splitlines()]
    return out


class _Stub(BaseHTTPRequestHandler):
    count = 0

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Stub.count += 1
        event = {"description": f"木木的第{_Stub.count}件事", "time": None}
        content = json.dumps({"events": [event], "entities": []}, ensure_ascii=False)
        body = json.dumps({"choices": [{"message": {"role": "assistant", "content": content},
                                        "finish_reason": "stop"}]}).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def stub() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def run(args: argparse.Namespace) -> dict[str, Any]:
    server, url = stub()
    prefix = args.prefix.format(n=args.scale)
    km = make_kemem(prefix, llm_base_url=url, llm_model="stub")
    result: dict[str, Any] = {"meta": stamp(), "scale": args.scale, "ops": args.ops}
    result["load_avg_start"] = _load()
    result["store"] = load(km, args.scale, args.seed)
    scope = heavy_scope(km)
    names = {"user_name": "木木", "agent_name": "祁煜"}
    said = lines()
    km.embedder.embed(["预热"])
    # session writes: two messages per add, a batch every 10 turns (extracted meanwhile)
    times = []
    session = f"bench-{int(time.time())}"
    for i in range(args.ops):
        pair = [{"role": "user", "content": said[(2 * i) % len(said)]},
                {"role": "assistant", "content": said[(2 * i + 1) % len(said)]}]  # fmt: skip
        t0 = time.perf_counter()
        km.add(pair, session_id=session, **scope, **names)
        times.append((time.perf_counter() - t0) * 1000)
    result["append_ms"] = percentiles(times)
    result["appends_per_s"] = round(1000 / (sum(times) / len(times)), 1)
    t0 = time.perf_counter()
    km.drain()
    drained = time.perf_counter() - t0
    batches = _Stub.count
    worker = km.sessions.manager.worker
    busy = sum(times) / 1000 + drained  # the worker ran during the adds and the drain
    result["batches"] = {"extracted": batches, "failed": worker.failures,
                         "per_min_upper_bound": round(batches / busy * 60, 1)}  # fmt: skip
    # context(): a window of 19 turns + the current message, budget 2000
    ctx_session = f"{session}-ctx"
    window = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": said[i]} for i in range(19)
    ]
    km.add(window, session_id=ctx_session, **scope, **names)
    km.sessions._pool.submit(lambda: None).result()  # the window's vector prepared meanwhile
    ctimes, before, bare, totals, parts = [], [], [], [], []
    prior = [{"role": t["role"], "content": t["content"]} for t in window]
    manager = km.sessions.manager
    for i in range(args.ops):
        said_now = said[(i * 7) % len(said)]
        t0 = time.perf_counter()
        ctx = km.context(said_now, session_id=ctx_session, **scope, **names)
        ctimes.append((time.perf_counter() - t0) * 1000)
        totals.append(ctx.tokens.total)
        parts.append(ctx.timings_ms)
        manager._known.clear()  # the state read on its own, as before
        t0 = time.perf_counter()
        km.context(said_now, session_id=ctx_session, context_vector="joint", **scope, **names)
        before.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()  # the recall alone: the query context() makes, by itself
        km.query(said_now, context=prior, context_vector="earlier", **scope, **names)
        bare.append((time.perf_counter() - t0) * 1000)
    result["context_ms"] = percentiles(ctimes)
    result["context_before_ms"] = percentiles(before)
    result["query_ms"] = percentiles(bare)
    result["context_parts_ms"] = {k: percentiles(p.get(k, 0.0) for p in parts) for k in parts[0]}
    result["context_tokens"] = percentiles(totals)
    result["window_turns"] = len(ctx.dialogue)
    result["load_avg_end"] = _load()
    km.delete_session(session, **scope)
    km.delete_session(ctx_session, **scope)
    km.close()
    server.shutdown()
    return result


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def markdown(r: dict[str, Any]) -> str:
    c, a, b = r["context_ms"], r["append_ms"], r["context_before_ms"]
    parts = ", ".join(f"{k} {v['p50']}" for k, v in r["context_parts_ms"].items())
    return "\n".join([
        f"store: {r['store'].get('docs')} user events; {r['ops']} ops each; load average "
        f"{r['load_avg_start']} → {r['load_avg_end']}",
        f"context(): p50 {c['p50']} ms, p99 {c['p99']} ms (window {r['window_turns']} turns, "
        f"tokens p50 {r['context_tokens']['p50']}); parts p50 (ms): {parts}",
        f"context() as before (joint window vector, state read alone), interleaved: "
        f"p50 {b['p50']} ms, p99 {b['p99']} ms; the same query alone (the window prepared): "
        f"p50 {r['query_ms']['p50']} ms, p99 {r['query_ms']['p99']} ms",
        f"session add (2 messages): p50 {a['p50']} ms, p99 {a['p99']} ms, "
        f"{r['appends_per_s']} adds/s on one thread",
        f"batches extracted: {r['batches']['extracted']} (failed {r['batches']['failed']}), "
        f"≤ {r['batches']['per_min_upper_bound']} / min against the stub",
    ])  # fmt: skip


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=int, default=100_000)
    p.add_argument("--ops", type=int, default=200)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--prefix", default="bench-mem-{n}", help="the store's prefix ({n}: scale)")
    p.add_argument("--out", type=Path)
    return p


if __name__ == "__main__":
    raise SystemExit(cli_main(parser, run, markdown))
