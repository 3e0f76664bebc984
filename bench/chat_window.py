"""How well the approximate path's answer to a chat turn holds the exact path's (issue 39/42).

On a kept benchmark store (``bench.latency --keep``), each utterance of the heavy user's
rolling conversation (``bench.latency.chat_contexts``: 6 earlier turns, the window prepared as
a session's ``context()`` prepares it) is asked twice: on the approximate path (``auto``, what a
chat app gets over a scope this large) and on the exact one (every memory in scope scored). Per
query: the share of the exact answer's memories the approximate answer holds (ids), and the
share of its summed score (a near tie swapped for another memory costs almost nothing). No
timings: run it with whichever ``kemem_es`` is on the path to compare two versions' windows
(``PYTHONPATH=<other tree> python <this file>``)::

    python -m bench.chat_window --prefix bench-lat-100000 --queries 200 --out after.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench import scale
from bench.common import make_kemem, stamp
from bench.latency import QUERY_OPTS, SCENARIOS, chat_contexts


def compare(km: Any, queries: int, warmup: int, seed: int) -> dict[str, Any]:
    texts = scale.queries(warmup + queries, seed + 4)  # bench.latency's utterances
    contexts = chat_contexts(texts)
    base = {**QUERY_OPTS, **SCENARIOS["per_user"]}
    ids: list[float] = []
    scores: list[float] = []
    alike = 0
    for text, ctx in list(zip(texts, contexts, strict=True))[warmup:]:
        window = ctx + "\n助手：好的，我在。"  # after the agent's reply, as bench.latency
        km.prepare_context(window, context_vector="split")
        opts = {**base, "context": window, "context_vector": "split"}
        approx = km.query(text, agent_id="a1", **opts).memory_events
        exact = km.query(text, agent_id="a1", **{**opts, "path": "exact"}).memory_events
        truth = {h.index for h in exact}
        ids.append(len(truth & {h.index for h in approx}) / len(truth) if truth else 1.0)
        total = sum(h.score for h in exact)
        scores.append(sum(h.score for h in approx) / total if total else 1.0)
        alike += [h.index for h in approx] == [h.index for h in exact]
    return {
        "queries": len(ids),
        "ids_of_exact": round(statistics.mean(ids), 4),
        "score_of_exact": round(statistics.mean(scores), 4),
        "score_of_exact_min": round(min(scores), 4),
        "same_answer": alike,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prefix", required=True, help="a kept bench.latency store")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20, help="skipped, as bench.latency does")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    km = make_kemem(args.prefix)
    out = {**stamp(km), "prefix": args.prefix, **compare(km, args.queries, args.warmup, args.seed)}
    print(json.dumps(out, ensure_ascii=False, indent=1))
    if args.out:
        args.out.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
