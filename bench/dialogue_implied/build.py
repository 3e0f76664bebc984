"""Build the implied-memory dev set's JSONL files from the hand-written sources here.

    python -m bench.dialogue_implied.build

The sources have bench/dialogue_check's format (``events_<user>.txt``: ``agent user|date|place|
scene|keywords|description``, the 1-based number among the memory lines is the id
``im-<user>-<agent>-NN``; ``dialogues_<user>.txt``: ``== agent user 用户名 角色名``, then per
query ``@ gold numbers`` and the turns ``A``/``U``, the first gold number the memory the dialogue
was written for). Output, committed and deterministic: ``events.jsonl``, ``queries.jsonl``
(style ``implied``, qids ``i-<user>-<agent>-NNN``; then the topic-shift dialogues of
``drift_<user>.txt``, same format, style ``implied_drift``, qids ``d-…``) and ``qrels.tsv``, so that
``bench.dialogue_eval --corpus implied`` runs it. ``python -m bench.dialogue_implied.build
--check`` prints, per dialogue, the words its last turn shares with its gold memory (the
writing rule, see README.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

from bench.dialogue.build import write_set
from bench.dialogue_check.build import BriefSet
from bench.dialogue_en.build import dialogues, read_names

SET = BriefSet(Path(__file__).resolve().parent, "im", ("implied", "i"))
HERE, events = SET.folder, SET.events


def queries(names: dict[str, str], known: set[str]) -> list[dict]:
    """The dialogues (style ``implied``), then the topic-shift ones (``implied_drift``)."""
    drift = dialogues(names, known, "drift_*.txt", HERE, ("implied_drift", "d"), SET.memory_id)
    return [*SET.queries(names, known), *drift]


def main() -> None:
    names = read_names(HERE)
    evs = events(names)
    qs = queries(names, {e["id"] for e in evs})
    write_set(HERE, evs, qs)
    print(f"{len(evs)} events, {len(qs)} dialogue queries")


def shared_words() -> list[tuple[str, list[str]]]:
    """(qid, words of two or more characters in both the last user turn and the gold memory's
    description), by jieba's default tokenizer: the check of the writing rule."""
    import json

    import jieba

    def words(text: str) -> set[str]:
        return {w for w in jieba.lcut(text) if len(w) >= 2 and not w.isascii()}

    docs = {
        e["id"]: e["description"]
        for e in map(json.loads, (HERE / "events.jsonl").read_text("utf-8").splitlines())
    }
    out = []
    for q in map(json.loads, (HERE / "queries.jsonl").read_text("utf-8").splitlines()):
        last = q["turns"][-1]["text"]  # drift: the earlier turns name a sibling on purpose
        out.append((q["qid"], sorted(words(last) & words(docs[q["gold"][0]]))))
    return out


if __name__ == "__main__":
    if "--check" in sys.argv[1:]:
        rows = shared_words()
        for qid, ws in rows:
            if ws:
                print(qid, " ".join(ws))
        print(f"{sum(1 for _, ws in rows if not ws)} of {len(rows)} last turns share no word")
    else:
        main()
