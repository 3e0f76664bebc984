"""The engine requests one chat turn sends, and the engine's CPU a turn (issue 42).

    python requests_per_turn.py PID

On the kept 100k store (`bench-lead-lat-100000`), 100 of bench.latency's per_user utterances
through `Kemem.query`, one at a time, bare and with 6 earlier turns as context (10 of each
first, to warm the caches); every request seen through the engine's request hook (`Engine.hook`);
the engine's CPU (utime + stime of PID from /proc, the idle node's ~19 ms a second included).
"""

from __future__ import annotations

import collections
import sys
import time
from typing import Any

from engine_parts import cpu_ms  # this folder's (run as a script, its folder is on the path)

from bench import latency as lat
from bench.common import make_kemem


def main() -> None:
    pid = sys.argv[1]
    km = make_kemem("bench-lead-lat-100000", query_timeout_s=60)
    texts = lat.scale.queries(110, 7)[10:]
    contexts = lat.chat_contexts(texts)
    opts = lat.SCENARIOS["per_user"]
    for t, c in list(zip(texts, contexts, strict=True))[:10]:
        km.query(t, agent_id="a1", **lat.QUERY_OPTS, **opts, context=c)
    seen: collections.Counter[tuple[str, str]] = collections.Counter()

    def hook(request: Any, answer: Any, seconds: float) -> None:
        seen[(request.method, request.path.split("?")[0])] += 1

    km.engine.hook = hook
    for name, with_context in (("bare", False), ("chat", True)):
        seen.clear()
        c0, t0 = cpu_ms(pid), time.perf_counter()
        for t, c in list(zip(texts, contexts, strict=True))[10:]:
            extra = {"context": c} if with_context else {}
            km.query(t, agent_id="a1", **lat.QUERY_OPTS, **opts, **extra)
        n = len(texts) - 10
        print(
            f"{name}: engine CPU {(cpu_ms(pid) - c0) / n:.2f} ms a turn, "
            f"wall {(time.perf_counter() - t0) / n * 1000:.2f} ms, requests {dict(seen)}"
        )


if __name__ == "__main__":
    main()
