"""Read-your-own-writes: what each option costs a single add (docs/consistency.md).

    python -m bench.read_your_writes [N]

Adds N memories with ``refresh=False`` (the default; a later read refreshes what it needs,
``store.fresh``), with ``refresh=True`` (``refresh="wait_for"``: the next scheduled refresh),
then add + an immediate refresh, and the refresh alone; medians, means and maxima in ms. Runs
on a throwaway prefix of the configured engine, deleted afterwards."""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from collections.abc import Callable

from kemem_es import Kemem
from kemem_es.config import get_settings
from kemem_es.store.layout import index_alias

A = {"agent_id": "qiyu", "user_id": "u_bench"}


def timed(n: int, fn: Callable[[int], object]) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        out.append((time.perf_counter() - t) * 1000)
    return out


def main(n: int = 30) -> None:
    km = Kemem(get_settings(index_prefix=f"bench-ryw-{uuid.uuid4().hex[:6]}"))
    km.init()
    alias = index_alias(km.settings.index_prefix, "user", "events")
    km.add("预热一下", **A)
    refreshes: list[float] = []

    def add_then_refresh(i: int) -> None:
        km.add(f"第{i}件事：豆包喜欢吃骨头{i}", **A, dedup=False)
        t = time.perf_counter()
        km.engine.refresh(alias)
        refreshes.append((time.perf_counter() - t) * 1000)

    try:
        rows = {
            "add refresh=False": timed(
                n, lambda i: km.add(f"第{i}件事：木木去公园散步{i}", **A, dedup=False)
            ),
            "add refresh=True (wait_for)": timed(
                n, lambda i: km.add(f"第{i}件事：小满在杭州划船{i}", **A, refresh=True, dedup=False)
            ),
            "add + immediate refresh": timed(n, add_then_refresh),
        }
        rows["the refresh alone"] = refreshes
        rows["get_all after an add (refreshes)"] = timed(
            n, lambda i: (km.add(f"又一件事{i}号", **A, dedup=False), km.get_all(**A, limit=20))
        )
        for name, ms in rows.items():
            print(
                f"{name:34s} median {statistics.median(ms):7.1f} ms  "
                f"mean {statistics.mean(ms):7.1f} ms  max {max(ms):7.1f} ms  (n={n})"
            )
    finally:
        for index in km.engine.get_index(f"{km.settings.index_prefix}-*"):
            km.engine.delete_index(index)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
