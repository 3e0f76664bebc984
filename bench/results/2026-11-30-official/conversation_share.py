"""The official memories' share of a conversation's recalls and writes (issue 42).

    python bench/results/2026-11-30-official/conversation_share.py bench-bsp-zh out.json

The dialogue dev set's long chats, queried as ``2026-11-30-coalesce/conversation_writes.py``
queries them (four users, 500 user turns, the block's earlier turns as context, limit 5, the
default threshold, ``reinforce=False``), each recall counted by database; then the writes a
turn every 10 s causes with coalescing at 60 s, every recall written (``reinforce_official``)
against the user's alone (the default now). An official memory is one record for all users.
"""

from __future__ import annotations

import json
import sys

from bench.common import make_kemem, stamp
from bench.long_chats import user_turns

PREFIX, OUT = sys.argv[1], sys.argv[2]
GAP_S, COALESCE_S = 10, 60
km = make_kemem(PREFIX)
recalls: list[list[tuple[str, str]]] = []
for agent, user, text, context in user_turns():
    r = km.query(text, user_id=user, agent_id=agent, limit=5, context=context)
    hits = [(h.db, "events", h.index) for h in r.memory_events]
    hits += [(h.db, "entities", str(h.index["index"])) for h in r.memory_entities]
    owner = {"official": agent, "user": user}
    recalls.append([(db, f"{kind}/{owner[db]}/{mid}") for db, kind, mid in hits])


def writes_per_turn(official: bool) -> float:
    last: dict[tuple[str, str], float] = {}
    writes = 0
    for i, keys in enumerate(recalls):
        t = i * GAP_S
        for k in set(keys):
            if (official or k[0] == "user") and t - last.get(k, -1e9) >= COALESCE_S:
                writes += 1
                last[k] = t
    return round(writes / len(recalls), 3)


n = len(recalls)
out = {
    "turns": n,
    "recalls_per_turn": {
        db: round(sum(k[0] == db for r in recalls for k in r) / n, 3) for db in ("user", "official")
    },
    "writes_per_turn_coalesced": {
        "every_recall": writes_per_turn(True),
        "user_memories_only": writes_per_turn(False),
    },
    "turn_gap_s": GAP_S,
    "coalesce_s": COALESCE_S,
    "stamp": stamp(km),
}
print(json.dumps({k: v for k, v in out.items() if k != "stamp"}))
with open(OUT, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
