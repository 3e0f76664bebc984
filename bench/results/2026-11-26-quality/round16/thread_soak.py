"""Hunt for state shared across threads on the query path: each dialogue query of the English
and the Chinese dev set asked one at a time, then twice over from 16 threads at a 1 µs switch
interval on a fresh Kemem (cold caches, the stem cache cleared), with explain and expansion
pruning on; every answer (events, entities, base words, expansions, scores) must be identical.

    python bench/results/2026-11-26-quality/round16/thread_soak.py   # stores of round 14
"""

import sys
from concurrent.futures import ThreadPoolExecutor

from bench import dialogue_eval as de
from bench.common import make_kemem
from kemem_es.text.stemming import stem


def key(resp):
    return (
        [(e.index, e.score) for e in resp.memory_events],
        [(e.index["index"], e.score) for e in resp.memory_entities],
        resp.additional_info.base_words,
        [w for w in resp.additional_info.expanded_words],
    )


def soak(corpus: str, prefix: str) -> str:
    qs = de.load_queries(corpus=corpus)
    opts = {"explain": True, "expand_min_cos": 0.3}
    km = make_kemem(prefix)
    want = [key(de.ask(km, q, **opts)) for q in qs]
    fresh = make_kemem(prefix)  # cold caches for the threaded run (the stem cache too)
    stem.cache_clear()
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(16) as pool:
            got = list(pool.map(lambda q: key(de.ask(fresh, q, **opts)), qs * 2))
    finally:
        sys.setswitchinterval(old)
    bad = [i for i, g in enumerate(got) if g != want[i % len(qs)]]
    return f"{corpus} {len(got)} answers, {len(bad)} differ {bad[:5]}"


for corpus, prefix in (("en", "bench-q14-ew"), ("zh", "bench-q14-zh")):
    print(soak(corpus, prefix))
