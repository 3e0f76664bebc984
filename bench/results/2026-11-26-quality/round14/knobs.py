"""Round 14: fusion's R@5 and primary R@1 per half on a kept dialogue store, for a list of
QueryParams settings (one JSON object each), every query asked once as bench.dialogue_eval asks
it, without reinforcement.

    python bench/results/2026-11-26-quality/round14/knobs.py hard bench-q14-hd \
        '{}' '{"utterance_weight": 0.1}' ...
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import bench.dialogue_eval as de
from bench.common import make_kemem
from bench.evalset import metrics

corpus, prefix, grid = sys.argv[1], sys.argv[2], [json.loads(x) for x in sys.argv[3:]]
km = make_kemem(prefix)
gold = de.qrels(corpus)
qs = de.load_queries(corpus=corpus, styles=de.CORPUS_STYLES[corpus])


def one(args):
    q, opts = args
    ids = [h.index for h in de.ask(km, q, mode="fusion", reinforce=False, **opts).memory_events]
    prim = next(d for d, g in gold[q["qid"]].items() if g == 2)
    return metrics(ids, gold[q["qid"]])["recall@5"], float(ids[:1] == [prim])


for opts in grid:
    with ThreadPoolExecutor(2) as p:
        rows = list(p.map(one, [(q, opts) for q in qs]))
    out = {}
    for name, styles in {
        "all": None,
        **{k: v for k, v in de.SETS.items() if k in ("short", "long", "check", "fresh", "hard")},
    }.items():
        for half in ("", "a", "b"):
            sel = [
                r
                for q, r in zip(qs, rows, strict=True)
                if (styles is None or q["style"] in styles)
                and (half == "" or (int(q["qid"].rsplit("-", 1)[1]) % 2 == 1) == (half == "a"))
            ]
            if sel:
                out[name + (" " + half if half else "")] = (
                    round(sum(r[0] for r in sel) / len(sel), 4),
                    round(sum(r[1] for r in sel) / len(sel), 3),
                )
    print(json.dumps(opts), out, flush=True)
