"""Build the dialogue dev set's JSONL files from the hand-written sources in this folder.

    python -m bench.dialogue.build

Sources (written for kemem-es, see README.md): ``dialogues_*.txt`` (recall style: the user
retells the episode in other words), ``hard_*.txt`` (situational: a present-day utterance
that makes the episode worth recalling) and ``long_*.txt`` (long: 5–8 turns whose last user
turn alone is vague; the memory is implied by the whole conversation), one block per query:
``@ gold ids`` then turns ``A``/``U``, the last one the user's utterance) and
``extra_events.txt`` / ``extra_events_long.txt`` (distractor events,
``pair|date|keywords|description``; ids ``ex-…`` / ``el-…``, gold tokens ``x03`` / ``el-03``).
Output, committed and deterministic: ``extra_events.jsonl`` and ``extra_events_long.jsonl``
(EventRecord lines), ``queries.jsonl`` and ``qrels.tsv``.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOW = "2025-10-01T12:00:00"
NAMES = {
    "u_mumu": "木木",
    "u_xiaoman": "小满",
    "u_chengcheng": "橙橙",
    "qiyu": "祁煜",
    "lishen": "黎深",
}


def gold_id(token: str, agent: str, user: str) -> str:
    if token.startswith("el-"):
        return f"el-{user}-{agent}-{token[3:]}"
    if token.startswith("o"):
        return f"ev-official-{agent}-{token[1:]}"
    if token.startswith("x"):
        return f"ex-{user}-{agent}-{token[1:]}"
    return f"ev-{user}-{agent}-{token}"


def extra_events(source: str = "extra_events.txt", prefix: str = "ex") -> list[dict]:
    out, seq = [], {}
    for line in (HERE / source).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        pair, date, keywords, description = line.split("|")
        agent, user = pair.split()
        seq[pair] = seq.get(pair, 0) + 1
        t = f"{date} 20:00:00"
        out.append(
            {
                "id": f"{prefix}-{user}-{agent}-{seq[pair]:02d}",
                "agent_id": agent,
                "user_id": user,
                "user_name": NAMES[user],
                "agent_name": NAMES[agent],
                "description": description,
                "keywords": keywords.split("/"),
                "created_at": t,
                "updatetime": t,
                "strength": 20.0,
            }
        )
    return out


def dialogues() -> list[dict]:
    out = []
    paths = [("recall", p) for p in sorted(HERE.glob("dialogues_*.txt"))]
    paths += [("situational", p) for p in sorted(HERE.glob("hard_*.txt"))]
    paths += [("long", p) for p in sorted(HERE.glob("long_*.txt"))]
    for style, path in paths:
        agent = user = ""
        block: dict | None = None
        blocks = []
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = raw.strip()
            if not line:
                continue
            if line.startswith("=="):
                agent, user = line.split()[1:3]
            elif line.startswith("@"):
                block = {"gold": line[1:].split(), "turns": []}
                blocks.append(block)
            else:
                role, text = line.split(" ", 1)
                speaker = NAMES[user] if role == "U" else NAMES[agent]
                assert block is not None
                block["turns"].append(
                    {
                        "role": "user" if role == "U" else "agent",
                        "speaker": speaker,
                        "text": text.strip(),
                    }
                )
        for n, b in enumerate(blocks, start=1):
            assert b["turns"][-1]["role"] == "user", (path, n)
            out.append(
                {
                    "qid": f"{style[0]}-{user}-{agent}-{n:03d}",
                    "style": style,
                    "agent_id": agent,
                    "user_id": user,
                    "turns": b["turns"],
                    "now": NOW,
                    "gold": [gold_id(t, agent, user) for t in b["gold"]],
                }
            )
    return out


def write_set(folder: Path, events: list[dict], qs: list[dict]) -> None:
    """A set with a corpus of its own (bench/dialogue_en, bench/dialogue_check): its
    ``events.jsonl``, then its queries and qrels."""
    with open(folder / "events.jsonl", "w", encoding="utf-8") as f:
        for e in events:
            f.write(json.dumps(e, ensure_ascii=False) + "\n")
    write_queries(folder, qs)


def write_queries(folder: Path, qs: list[dict]) -> None:
    """``queries.jsonl`` and ``qrels.tsv``: the first gold id is the memory the dialogue was
    written for (relevance 2), the others related ones (1). Shared with bench/dialogue_en."""
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for q in qs:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    with open(folder / "qrels.tsv", "w", encoding="utf-8") as f:
        f.write("qid\tdoc_id\trelevance\n")
        for q in qs:
            for i, d in enumerate(q["gold"]):
                f.write(f"{q['qid']}\t{d}\t{2 if i == 0 else 1}\n")


def main() -> None:
    events = extra_events()
    long_events = extra_events("extra_events_long.txt", "el")
    for name, evs in (("extra_events.jsonl", events), ("extra_events_long.jsonl", long_events)):
        with open(HERE / name, "w", encoding="utf-8") as f:
            for e in evs:
                f.write(json.dumps(e, ensure_ascii=False) + "\n")
    qs = dialogues()
    write_queries(HERE, qs)
    print(f"{len(events)} + {len(long_events)} extra events, {len(qs)} queries")


if __name__ == "__main__":
    main()
