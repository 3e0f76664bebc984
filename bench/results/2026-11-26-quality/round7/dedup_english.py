"""Round 7: what ``add`` (dedup on, the default) keeps of the English dev memories, one at a time.

    KEMEM_DEDUP_MIN_OVERLAP=0 PYTHONPATH=. python .../round7/dedup_english.py   # the cosine rule
    PYTHONPATH=. python .../round7/dedup_english.py                             # + word overlap

Each scope's events (bench/dialogue_en/events.jsonl: 60 one-episode memories for three users, 25
session summaries for three more) are added in file order through ``Kemem.add`` with defaults,
into a scratch prefix that is dropped afterwards. Prints the ADD / UPDATE counts and how many
memories the scope holds at the end.
"""

from __future__ import annotations

import collections
import json

from bench.common import ROOT, make_kemem


def main() -> None:
    km = make_kemem("bench-r7-dedup")
    for index in km.engine.get_index("bench-r7-dedup-*"):
        km.engine.delete_index(index)
    km.init()
    settings = km.settings
    print(f"dedup_threshold {settings.dedup_threshold}, min_overlap {settings.dedup_min_overlap}")
    scopes: dict[tuple[str, str], list[dict]] = collections.defaultdict(list)
    with open(ROOT / "dialogue_en" / "events.jsonl", encoding="utf-8") as f:
        for r in map(json.loads, f):
            scopes[(r["agent_id"], r["user_id"])].append(r)
    try:
        for (agent, user), rows in scopes.items():
            events: collections.Counter[str] = collections.Counter()
            for r in rows:
                rec = {k: r[k] for k in ("description", "event_time", "created_at") if k in r}
                events[km.add(rec, agent_id=agent, user_id=user, refresh=True)[0].event] += 1
            kept = km.count(agent_id=agent, user_id=user)
            print(f"{agent}/{user}: {len(rows)} added → {dict(events)}, {kept} memories kept")
    finally:
        for index in km.engine.get_index("bench-r7-dedup-*"):
            km.engine.delete_index(index)


if __name__ == "__main__":
    main()
