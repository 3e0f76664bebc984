"""The topic-shift gate on the real engine (issue 39, search.topic_shift): the earlier turns
name one memory, the last turn moves on to a sibling of the same thread. The engine returns
each hit's matched earlier-turn pieces, and the memory the last turn means rises above the one
the conversation already holds. One user of the implied-memory dev set (40 memories), four of
its topic-shift dialogues whose gold was second or fourth without the gate and first with it
(bench/results/2026-11-29-shift)."""

from __future__ import annotations

import json

from bench import dialogue_eval as de

USER = "u_ahao"
QIDS = ("d-u_ahao-xiaolan-001", "d-u_ahao-xiaolan-007", "d-u_ahao-xiaolan-008")


def test_the_memory_the_last_turn_means_passes_the_one_the_context_names(kemem) -> None:
    records = [
        r
        for r in de.event_records(kemem, de.CORPORA["implied"] / "events.jsonl", "written")
        if r.user_id == USER
    ]
    kemem.init()
    kemem.index_records(records, kind="events", db="user")
    queries = [q for q in de.load_queries(corpus="implied") if q["qid"] in QIDS]
    assert len(queries) == len(QIDS)
    first = {"off": 0, "on": 0}
    for q in queries:
        gold = q["gold"][0]
        for name, gate in (("off", 0.0), ("on", 0.2)):
            resp = de.ask(kemem, q, reinforce=False, context_words_gate=gate)
            ids = [h.index for h in resp.memory_events]
            first[name] += ids[0] == gold
            if name == "on":  # the memory the earlier turns name lost their words' share
                assert ids[0] == gold, json.dumps(ids, ensure_ascii=False)
    assert first == {"off": 0, "on": len(QIDS)}, first
