"""How many words a dialogue shares with the memory it was written for (characterises a set; no
retrieval): the package's tokens of two or more characters, stop words, digits and the
speakers' names left out, in the description and keywords.

    python bench/results/2026-11-26-quality/round9/overlap.py
"""

from __future__ import annotations

import json
import statistics

from kemem_es.text import default_stopwords, default_tokenizer

TOK = default_tokenizer()
STOP = default_stopwords()
LONG_EVENTS = [
    "kemem_es/demo/user_events.jsonl",
    "kemem_es/demo/official_events.jsonl",
    "bench/dialogue/extra_events.jsonl",
    "bench/dialogue/extra_events_long.jsonl",
]


def words(text: str) -> set[str]:
    return {w for w in TOK.tokenize(text) if len(w) > 1 and w not in STOP and not w.isdigit()}


def jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def load(folder: str, style: str, event_files: list[str]) -> tuple[list[dict], dict[str, str]]:
    mem = {
        e["id"]: e["description"] + " " + " ".join(e.get("keywords", []))
        for path in event_files
        for e in jsonl(path)
    }
    return [q for q in jsonl(f"{folder}/queries.jsonl") if q["style"] == style], mem


def main() -> None:
    sets = {
        "long": load("bench/dialogue", "long", LONG_EVENTS),
        "check": load("bench/dialogue_check", "check", ["bench/dialogue_check/events.jsonl"]),
    }
    for name, (qs, mem) in sets.items():
        last, whole = [], []
        for q in qs:
            gold = words(mem[q["gold"][0]]) - {t["speaker"] for t in q["turns"]}
            last.append(len(words(q["turns"][-1]["text"]) & gold))
            whole.append(len(set().union(*(words(t["text"]) for t in q["turns"])) & gold))
        n = len(qs)
        print(
            f"{name:6s} n={n}  last turn shares no word: {sum(x == 0 for x in last) / n:.2f}  "
            f"whole dialogue shares none: {sum(x == 0 for x in whole) / n:.2f}  "
            f"median words shared (whole): {statistics.median(whole)}  "
            f"median turns: {statistics.median(len(q['turns']) for q in qs)}"
        )


if __name__ == "__main__":
    main()
