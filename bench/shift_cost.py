"""What the topic-shift gate costs the engine: the same fusion event searches with and without
the named earlier-turn clauses (``context_words_gate``), interleaved, over the dialogues whose
utterance the gate applies to; the engine's own ``took`` (ms) summed per round.

    python -m bench.shift_cost --corpus implied --prefix bench-shift-implied [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from datetime import datetime
from typing import Any


def main(argv: list[str] | None = None) -> int:
    from bench.common import make_kemem
    from bench.dialogue_eval import load_queries, query_text
    from kemem_es.contract.params import QueryParams
    from kemem_es.search import topic_shift
    from kemem_es.search.stopwatch import Stopwatch
    from kemem_es.text.dialogue import context_turns, split_label

    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="implied")
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--gate", type=float, default=0.2)
    args = ap.parse_args(argv)
    km = make_kemem(args.prefix)
    s = km.searcher
    pairs: list[tuple[list[Any], list[Any]]] = []
    for q in load_queries(corpus=args.corpus):
        text, context = query_text(q)
        now = datetime.fromisoformat(q["now"])
        searches = []
        for gate in (0.0, args.gate):
            p = QueryParams(
                user_id=q["user_id"],
                agent_id=q["agent_id"],
                context=context,
                now=now,
                limit=10,
                score_threshold=0.0,
                context_words_gate=gate,
            )
            utterance = split_label(text).text
            turns = context_turns(p.context, p.context_turns)
            plan = s.plan(utterance, turns, p, now, Stopwatch())
            if gate > 0 and not topic_shift.applies(plan.params, plan.words):
                break
            searches.append(
                s.event_searches(plan.params, plan.words, plan.vector, now, plan.parts)[0]
            )
        if len(searches) == 2:
            pairs.append((searches[0], searches[1]))
    print(f"{len(pairs)} dialogues the gate applies to", file=sys.stderr)
    took: dict[str, list[float]] = {"off": [], "on": []}
    for r in range(args.rounds):
        order = ("off", "on") if r % 2 == 0 else ("on", "off")
        for name in order:
            total = 0.0
            for off, on in pairs:
                for resp in s.engine.msearch(off if name == "off" else on):
                    total += float(resp.get("took", 0))
            took[name].append(total / max(len(pairs), 1))
    for name, xs in took.items():
        med = statistics.median(xs)
        print(f"{name}: engine took per dialogue, median over rounds {med:.3f} ms")
    ratio = statistics.median(took["on"]) / max(statistics.median(took["off"]), 1e-9)
    print(f"on/off: {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
