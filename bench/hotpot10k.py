"""10k synthetic events for one user, embedded for real (their own text), then the 火锅 query."""

import sys

sys.path.insert(0, ".")
from bench import scale
from bench.common import make_kemem, drop_indices
from kemem_es import EventRecord

km = make_kemem("bench-q-hotpot")
if sys.argv[1] == "build":
    drop_indices(km)
    km.init()
    n = 0
    for batch in scale.events(10000, seed=3, heavy=10000, n_users=1):
        recs = [
            EventRecord(**{k: v for k, v in d.items() if k in EventRecord.model_fields})
            for d in batch
        ]
        rep = km.index_records(recs, "events", "user")
        n += rep.indexed
    print("indexed", n, recs[0].user_id)
elif sys.argv[1] == "query":
    user = sys.argv[2]
    for text in ("阿杰又想吃火锅了", "好想吃火锅啊"):
        r = km.query(text, agent_id="a1", user_id=user, limit=5, score_threshold=0.0)
        print(text, r.additional_info.base_words)
        for e in r.memory_events:
            print("  %.3f %s | %s" % (e.score, "/".join(e.keyword), e.description[:46]))
else:
    drop_indices(km)
