"""The issue-12 火锅 check on a 10k store whose vectors are the texts' own embeddings.

    python -m bench.hotpot10k build    # 10,000 synthetic events of one user (bench.scale), embedded
    python -m bench.hotpot10k query    # top 5 for 阿杰又想吃火锅了 / 好想吃火锅啊
    python -m bench.hotpot10k drop

(bench.latency's stores reuse a pool of unrelated vectors, so they cannot judge meaning.)
"""

from __future__ import annotations

import sys

from bench import scale
from bench.common import drop_indices, make_kemem

QUERIES = ("阿杰又想吃火锅了", "好想吃火锅啊")


def main(action: str, user: str = "u00000") -> None:
    from kemem_es import EventRecord

    km = make_kemem("bench-q-hotpot")
    if action == "build":
        drop_indices(km)
        km.init()
        n = 0
        for batch in scale.events(10_000, seed=3, heavy=10_000, n_users=1):
            fields = EventRecord.model_fields
            recs = [EventRecord(**{k: v for k, v in d.items() if k in fields}) for d in batch]
            n += km.index_records(recs, "events", "user").indexed
        print("indexed", n)
    elif action == "query":
        for text in QUERIES:
            r = km.query(text, agent_id="a1", user_id=user, limit=5, score_threshold=0.0)
            print(text, r.additional_info.base_words)
            for e in r.memory_events:
                print(f"  {e.score:.3f} {'/'.join(e.keyword)} | {e.description[:46]}")
    else:
        drop_indices(km)


if __name__ == "__main__":
    main(*sys.argv[1:])
