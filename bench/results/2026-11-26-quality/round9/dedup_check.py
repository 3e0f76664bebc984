"""What ``add`` (dedup on, the default) keeps of the check set's memories, one at a time: a chat
app that stores what was said through the Memory API, not the bulk indexer. Its near-miss
threads (several vet visits, several birthdays) must stay separate memories.

    PYTHONPATH=. python bench/results/2026-11-26-quality/round9/dedup_check.py

Each scope's events (bench/dialogue_check/events.jsonl, 85 per user) are added in file order
through ``Kemem.add`` with defaults (description, time, place, scene, keywords), into a scratch
prefix that is dropped afterwards. Prints the ADD / UPDATE counts and the memories kept.
"""

from __future__ import annotations

import collections
import json

from bench.common import ROOT, make_kemem

FIELDS = ("description", "created_at", "place", "scene", "keywords")


def main() -> None:
    km = make_kemem("bench-r9-dedup")
    for index in km.engine.get_index("bench-r9-dedup-*"):
        km.engine.delete_index(index)
    km.init()
    settings = km.settings
    print(f"dedup_threshold {settings.dedup_threshold}, min_overlap {settings.dedup_min_overlap}")
    scopes: dict[tuple[str, str], list[dict]] = collections.defaultdict(list)
    with open(ROOT / "dialogue_check" / "events.jsonl", encoding="utf-8") as f:
        for r in map(json.loads, f):
            scopes[(r["agent_id"], r["user_id"])].append(r)
    try:
        for (agent, user), rows in scopes.items():
            events: collections.Counter[str] = collections.Counter()
            for r in rows:
                rec = {k: r[k] for k in FIELDS if r.get(k)}
                events[km.add(rec, agent_id=agent, user_id=user, refresh=True)[0].event] += 1
            kept = km.count(agent_id=agent, user_id=user)
            print(f"{agent}/{user}: {len(rows)} added → {dict(events)}, {kept} memories kept")
    finally:
        for index in km.engine.get_index("bench-r9-dedup-*"):
            km.engine.delete_index(index)


if __name__ == "__main__":
    main()
