"""The English dev sets with another tenant's short latin names in the store.

    python bench/results/2026-11-26-quality/round8/names_ab.py bench-q8-nf   # this code
    PYTHONPATH=<worktree of 1ed093c> python …/names_ab.py bench-q8-nb        # the code before

Indexes the English dev corpus (bench/dialogue_en) under PREFIX, then six entities of another
scope named Tim, Sam, Ed, Al, Ann and Jo (its user Ann, its agent Jo), and runs the English
sets in fusion, bm25 and rrf. Prints how a sentence tokenises and R@5 per set; drops the
indices afterwards. Output: names_ab.txt.
"""

from __future__ import annotations

import sys

from bench import dialogue_eval as de
from bench.common import drop_indices, make_kemem

NAMES = ["Tim", "Sam", "Ed", "Al", "Ann", "Jo"]


def other_tenant() -> list[dict]:
    return [
        {
            "id": f"other-{i}",
            "agent_id": "x",
            "user_id": "u_other",
            "user_name": "Ann",
            "agent_name": "Jo",
            "entity_name": name,
            "entity_type": "具体实体",
            "kind": "特殊实体属性",
            "keyword": "friend",
            "description": f"{name} is a friend from the climbing gym",
            "updatetime": "2024-01-01 10:00:00",
            "strength": 20.0,
        }
        for i, name in enumerate(NAMES)
    ]


def main(prefix: str) -> None:
    km = make_kemem(prefix)
    drop_indices(km)
    try:
        de.index_corpus(km, "en", "written")
        km.index_records(other_tenant(), kind="entities", db="user")
        km.searcher.learn_names()  # as a server does within its 5 minutes
        print(km.tokenizer.tokenize("the same time, I need to call Ann about the planned trip"))
        queries = de.load_queries("all", de.STYLES[3:], "en")
        gold = de.qrels("en")
        for mode in ("fusion", "bm25", "rrf"):
            r = de.run_mode(km, queries, gold, mode, {}, 2)
            print(mode, {k: round(v["recall@5"], 3) for k, v in r["by_set"].items()})
    finally:
        drop_indices(km)


if __name__ == "__main__":
    main(sys.argv[1])
