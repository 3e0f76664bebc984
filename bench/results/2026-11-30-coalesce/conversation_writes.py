"""How many reinforcement writes a conversation causes, with and without coalescing (issue 42).

    python bench/results/2026-11-30-coalesce/conversation_writes.py bench-bsp-zh out.json

The long dialogues of the dialogue dev set (bench/dialogue/long_*.txt: four users, 126 user
turns each, in blocks), each user's turns in order as one chat: every user turn is queried as
a chat app sends it (limit 5, the default threshold, the block's earlier turns as context,
``reinforce=False``: the recalls are counted here, nothing is written), and the recalls are
replayed against the coalescing rule with a turn every ``gap`` seconds: a memory is written at
its first recall after ``coalesce_s`` has passed since its last write (its recalls in between
ride along), else at the next flush.
"""

from __future__ import annotations

import json
import sys

from bench.common import make_kemem, stamp
from bench.long_chats import user_turns

PREFIX, OUT = sys.argv[1], sys.argv[2]
km = make_kemem(PREFIX)
recalls: list[list[tuple[str, str]]] = []
for agent, user, text, context in user_turns():
    r = km.query(text, user_id=user, agent_id=agent, limit=5, context=context)
    recalls.append(
        [(h.db + "/events", f"{user}/{h.index}") for h in r.memory_events]
        + [(h.db + "/entities", f"{user}/{h.index['index']}") for h in r.memory_entities]
    )
total = sum(len(r) for r in recalls)
rows = []
for gap in (5, 10, 30):
    for coalesce in (0, 30, 60):
        last: dict[tuple[str, str], float] = {}
        writes = 0
        for i, keys in enumerate(recalls):
            t = i * gap
            for k in set(keys):
                if coalesce == 0 or t - last.get(k, -1e9) >= coalesce:
                    writes += 1
                    last[k] = t
        rows.append({"turn_gap_s": gap, "coalesce_s": coalesce, "writes_per_turn":
                     round(writes / len(recalls), 2)})  # fmt: skip
        print(rows[-1])
out = {"turns": len(recalls), "recalls_per_turn": round(total / len(recalls), 2),
       "distinct_per_user_conversation": len({k for r in recalls for k in r}),
       "rows": rows, "stamp": stamp(km)}  # fmt: skip
print({k: v for k, v in out.items() if k != "rows" and k != "stamp"})
with open(OUT, "w", encoding="utf-8") as f:
    json.dump(out, f, indent=1, ensure_ascii=False)
