"""Round 14: what ``add`` (dedup on, the default) keeps of the Chinese check sets' memories, one
at a time. Their users have threads of same-topic memories (four vet visits, two knee
operations), the memories a too-eager merge would lose.

    PYTHONPATH=. python bench/results/2026-11-26-quality/round14/dedup_chinese.py

Each scope's events (bench/dialogue_check and bench/dialogue_fresh events.jsonl, the Chinese
users) are added in file order through ``Kemem.add`` with defaults (text, keywords, time), into
a scratch prefix that is dropped afterwards. Prints the ADD / UPDATE / NOOP counts, how many
memories each scope holds at the end, and the pairs that were merged.
"""

from __future__ import annotations

import collections
import json

from bench.common import ROOT, make_kemem


def main() -> None:
    km = make_kemem("bench-r14-dedup")
    for index in km.engine.get_index("bench-r14-dedup-*"):
        km.engine.delete_index(index)
    km.init()
    s = km.settings
    print(f"dedup_threshold {s.dedup_threshold}, min_overlap {s.dedup_min_overlap}")
    scopes: dict[tuple[str, str], list[dict]] = collections.defaultdict(list)
    for folder in ("dialogue_check", "dialogue_fresh"):
        with open(ROOT / folder / "events.jsonl", encoding="utf-8") as f:
            for r in map(json.loads, f):
                if r["user_id"] not in ("u_tomas", "u_grace"):  # the English summaries
                    scopes[(r["agent_id"], r["user_id"])].append(r)
    try:
        for (agent, user), rows in scopes.items():
            events: collections.Counter[str] = collections.Counter()
            for r in rows:
                rec = {k: r[k] for k in ("description", "keywords", "created_at") if k in r}
                res = km.add(rec, agent_id=agent, user_id=user, refresh=True)[0]
                events[res.event] += 1
                if res.event != "ADD" and res.previous is not None:
                    print(f"  {res.event}: {r['description'][:40]} ← {res.previous.memory[:40]}")
            kept = km.count(agent_id=agent, user_id=user)
            print(f"{agent}/{user}: {len(rows)} added → {dict(events)}, {kept} memories kept")
    finally:
        for index in km.engine.get_index("bench-r14-dedup-*"):
            km.engine.delete_index(index)


if __name__ == "__main__":
    main()
