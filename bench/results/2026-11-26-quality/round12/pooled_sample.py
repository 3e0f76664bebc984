"""The pooled MemDaily sample both round-12 scripts ask: the 600 queries ``bench.memdaily``
samples for its pooled test (seed 1), the set, and a client on the kept store."""

from __future__ import annotations

import argparse
from typing import Any

from bench.common import make_kemem
from bench.evalset import EvalSet
from bench.memdaily import sample


def open_sample() -> tuple[EvalSet, Any, list[dict[str, Any]]]:
    p = argparse.ArgumentParser()
    p.add_argument("--prefix", default="bench-q6-md")
    p.add_argument("--data", default="../shared/data/dev/memdaily")
    args = p.parse_args()
    es = EvalSet.load(args.data)
    return es, make_kemem(args.prefix), sample(list(es.queries), 600, seed=1)
