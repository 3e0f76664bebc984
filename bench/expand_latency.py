"""Latency of the text pipeline: cold loads, then p50/p99 of tokenise + base words + expand.

    python bench/expand_latency.py [--iterations 2000] [--max-words 100] [--json out.json]

Cold numbers are first loads in this process (jieba's dictionary cache file in the temp dir
may already exist from earlier runs, as it would on a server). Not a test: numbers vary by host.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import sys
import time
from pathlib import Path

import jieba
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kemem_es.expand import Expander, Lexicon
from kemem_es.text import IdfTable, default_tokenizer, pick_base_words

SENTENCE = "下周就是我的生日了，想和闺蜜一起去吃火锅，再去看一场演唱会！"  # 30 characters


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return (time.perf_counter() - start) * 1000, out


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    arr = np.asarray(samples_ms)
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 4),
        "p99_ms": round(float(np.percentile(arr, 99)), 4),
        "mean_ms": round(float(arr.mean()), 4),
    }


def loop(fn, iterations: int) -> list[float]:
    for _ in range(min(200, iterations)):  # warm-up
        fn()
    out = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentence", default=SENTENCE)
    ap.add_argument("--iterations", type=int, default=2000)
    ap.add_argument("--max-words", type=int, default=100)
    ap.add_argument("--lexicon", type=Path, default=None, help="a built .npz (default: shipped)")
    ap.add_argument("--json", type=Path, default=None, help="also write results here")
    args = ap.parse_args()
    jieba.setLogLevel(logging.WARNING)

    cold: dict[str, float] = {}
    cold["lexicon_load_ms"], lexicon = timed(lambda: Lexicon.load(args.lexicon))
    reloads = [timed(lambda: Lexicon.load(args.lexicon))[0] for _ in range(5)]
    cold["lexicon_reload_median_ms"] = statistics.median(reloads)
    tok = default_tokenizer()
    cold["jieba_init_ms"], _ = timed(lambda: tok.tokenize("初始化"))
    cold["idf_load_ms"], idf = timed(IdfTable.load)
    exp = Expander(lexicon, tok, idf)
    cold = {k: round(v, 2) for k, v in cold.items()}

    s, n, m = args.sentence, args.iterations, args.max_words
    warm = {
        "tokenize": percentiles(loop(lambda: tok.tokenize(s), n)),
        "base_words": percentiles(loop(lambda: pick_base_words(s, tokenizer=tok, idf=idf), n)),
    }
    for strategy in (0, 1):
        warm[f"expand_s{strategy}"] = percentiles(
            loop(lambda st=strategy: exp.expand(s, max_words=m, strategy=st), n)
        )
    sample = exp.expand(s, max_words=m, strategy=1)

    result = {
        "sentence": s,
        "chars": len(s),
        "max_words": m,
        "iterations": n,
        "lexicon_words": len(lexicon),
        "base_words": [k.word for k in sample.keywords],
        "expanded_count": len(sample.expanded),
        "cold": cold,
        "warm": warm,
        "host": {"python": platform.python_version(), "machine": platform.machine()},
    }
    print(f"sentence ({len(s)} chars): {s}")
    print(f"base words: {' '.join(result['base_words'])}; expanded: {len(sample.expanded)}")
    print("\ncold (ms)")
    for k, v in cold.items():
        print(f"  {k:<28}{v:>10.2f}")
    print(f"\nwarm, {n} runs (ms)      p50        p99       mean")
    label = {"expand_s0": "tokenise+base+expand s0", "expand_s1": "tokenise+base+expand s1"}
    for k, v in warm.items():
        p50, p99, mean = v["p50_ms"], v["p99_ms"], v["mean_ms"]
        print(f"  {label.get(k, k):<24}{p50:>8.3f}  {p99:>9.3f}  {mean:>9.3f}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, ensure_ascii=False, indent=2), encoding="utf-8")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
