"""Native against script scoring (or one engine against another): the same queries on two
configurations, every event and entity answer compared by id, order and unrounded score.

    python scripts/scoring_compare.py --a http://127.0.0.1:9235,script \
        --b http://127.0.0.1:9235,native [--prefix kemem] [--paths exact,approx] \
        [--modes fusion,two_stage,bm25,vector] [--tolerance 1e-5]

Each side is ``URL,SCORING`` (scoring: native, script or auto); both must hold the same memories
under the same index prefix (e.g. ``kemem-es demo`` on each). Reinforcement is off, so a query
does not change what the next one scores. Prints the largest score difference per mode and path,
each query's p50 engine round trip per side, and exits 1 when an answer differs (other ids, other
order, or a score beyond the tolerance).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kemem_es.contract.params import QueryParams
from kemem_es.kemem import Kemem

PAIRS = [
    ("u_mumu", "qiyu"),
    ("u_mumu", "lishen"),
    ("u_xiaoman", "lishen"),
    ("u_chengcheng", "qiyu"),
]
UTTERANCES = [
    "室友失恋了，我们陪她吃了一晚上火锅",
    "最近总是失眠，晚上睡不着",
    "海边写生看日落",
    "she painted the sunset by the sea again",
    "最近胃不舒服，是不是又吃太辣了",
    "下周就是我的生日了，你会送我什么",
    "今天去看了演唱会，嗓子都喊哑了",
    "我想学画画，但总觉得自己没天赋",
    "猫咪今天不肯吃饭，有点担心",
    "加班到十一点，好累啊",
    "你还记得我们第一次见面吗",
    "春节回家被亲戚催婚了",
    "下雨天最适合喝一杯热咖啡",
    "考试没考好，心情很差",
    "周末想去海边走走。顺便拍点照片，晚上再吃顿海鲜",
]
NOW = datetime(2025, 6, 1, 12, 0, 0)


class Side:
    """One configuration: a Kemem whose searcher records the unrounded ranked answers."""

    def __init__(self, spec: str, prefix: str) -> None:
        url, scoring = spec.rsplit(",", 1)
        self.name = spec
        self.km = Kemem(es_url=url, scoring=scoring, index_prefix=prefix, reinforce=False)
        self.last: dict[str, Any] = {}
        self.times: list[float] = []
        searcher = self.km.searcher
        rank_events, score_entities = searcher.rank_events, searcher.score_entities
        msearch = searcher.engine.msearch

        def ranked(*a: Any, **kw: Any) -> Any:
            out = rank_events(*a, **kw)
            self.last["events"] = [(h["_id"], score) for _, h, score, _ in out[0]]
            return out

        def entities(*a: Any, **kw: Any) -> Any:
            out = score_entities(*a, **kw)
            self.last["entities"] = [(h["_id"], score) for h, score in out]
            return out

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return msearch(*a, **kw)
            finally:
                self.times.append((time.perf_counter() - t0) * 1000)

        searcher.rank_events = ranked  # type: ignore[method-assign]
        searcher.score_entities = entities  # type: ignore[method-assign]
        searcher.engine.msearch = timed  # type: ignore[method-assign]
        self.scoring = searcher.engine.dialect.scoring

    def answer(self, text: str, params: QueryParams) -> dict[str, Any]:
        self.last = {"events": [], "entities": []}
        self.km.searcher.query(text, params)
        return self.last


def compare(
    a: list[tuple[str, float]], b: list[tuple[str, float]], tol: float
) -> tuple[bool, float]:
    """(same ids in the same order within the tolerance, largest score difference)."""
    diff = max((abs(x[1] - y[1]) for x, y in zip(a, b, strict=False)), default=0.0)
    same_ids = [x[0] for x in a] == [y[0] for y in b]
    if not same_ids:
        # equal scores (ties within the tolerance) may come in either order
        sa = sorted(a, key=lambda r: (round(-r[1] / tol), r[0]))
        sb = sorted(b, key=lambda r: (round(-r[1] / tol), r[0]))
        same_ids = [x[0] for x in sa] == [y[0] for y in sb]
    return same_ids and diff <= tol, diff


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="URL,SCORING")
    ap.add_argument("--b", required=True, help="URL,SCORING")
    ap.add_argument("--prefix", default="kemem")
    ap.add_argument("--paths", default="exact,approx")
    ap.add_argument("--modes", default="fusion,two_stage,bm25,vector")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    args = ap.parse_args()
    a, b = Side(args.a, args.prefix), Side(args.b, args.prefix)
    print(f"A: {a.name} (scoring {a.scoring})\nB: {b.name} (scoring {b.scoring})")
    failures = 0
    for mode in args.modes.split(","):
        for path in args.paths.split(","):
            worst, n, bad = 0.0, 0, 0
            for user, agent in PAIRS:
                for text in UTTERANCES:
                    params = QueryParams(
                        user_id=user, agent_id=agent, now=NOW, limit=8, score_threshold=0.0,
                        mode=mode, path=path,
                    )  # fmt: skip
                    ra, rb = a.answer(text, params), b.answer(text, params)
                    for what in ("events", "entities"):
                        ok, diff = compare(ra[what], rb[what], args.tolerance)
                        worst, n = max(worst, diff), n + 1
                        if not ok:
                            bad += 1
                            print(f"  DIFF {mode}/{path} {what} {user}/{agent} {text}")
                            print(f"    A {[(i, round(s, 6)) for i, s in ra[what]]}")
                            print(f"    B {[(i, round(s, 6)) for i, s in rb[what]]}")
            failures += bad
            print(f"{mode:9s} {path:6s} {n} answers, {bad} differ, max |score diff| {worst:.2e}")
    for side in (a, b):
        t = side.times
        print(f"{side.name}: engine round trip p50 {statistics.median(t):.1f} ms ({len(t)} calls)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
