"""The same check through AsyncKemem: every English and Chinese dev query asked twice over, 32
at a time on one event loop (the CPU stages run in the loop's thread pool), at a 1 µs switch
interval with the stem cache cleared; every answer must equal the sync API's.

    python bench/results/2026-11-26-quality/round16/async_soak.py   # stores of round 14
"""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime
from typing import Any

from bench import dialogue_eval as de
from bench.common import make_kemem
from kemem_es import AsyncKemem
from kemem_es.text.stemming import stem


def key(resp: Any) -> tuple:
    return (
        [(e.index, e.score) for e in resp.memory_events],
        [(e.index["index"], e.score) for e in resp.memory_entities],
        resp.additional_info.base_words,
    )


async def ask_all(akm: AsyncKemem, qs: list[dict[str, Any]]) -> list[tuple]:
    gate = asyncio.Semaphore(32)

    async def one(q: dict[str, Any]) -> tuple:
        text, context = de.query_text(q)
        async with gate:
            resp = await akm.query(
                text, user_id=q["user_id"], agent_id=q["agent_id"], context=context,
                now=datetime.fromisoformat(q["now"]), limit=10, score_threshold=0.0,
                explain=True,
            )  # fmt: skip
        return key(resp)

    return await asyncio.gather(*(one(q) for q in qs))


async def soak(settings: Any, qs: list[dict[str, Any]]) -> list[tuple]:
    async with AsyncKemem(settings) as akm:
        return await ask_all(akm, qs * 2)


for corpus, prefix in (("en", "bench-q14-ew"), ("zh", "bench-q14-zh")):
    queries = de.load_queries(corpus=corpus)
    km = make_kemem(prefix)
    want = [key(de.ask(km, q, explain=True)) for q in queries]
    stem.cache_clear()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        got = asyncio.run(soak(km.settings, queries))
    finally:
        sys.setswitchinterval(interval)
    bad = [i for i, g in enumerate(got) if g != want[i % len(queries)]]
    print(corpus, len(got), "async answers,", len(bad), "differ", bad[:5])
