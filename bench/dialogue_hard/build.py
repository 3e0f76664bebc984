"""Build the hard dev set's JSONL files from the hand-written sources here.

    python -m bench.dialogue_hard.build

The sources have bench/dialogue_check's format (``events_<user>.txt``: ``agent user|date|place|
scene|keywords|description``, the 1-based number among the memory lines is the id
``hd-<user>-<agent>-NN``; ``dialogues_<user>.txt``: ``== agent user 用户名 角色名``, then per
query ``@ gold numbers`` and the turns ``A``/``U``, the first gold number the memory the dialogue
was written for). Output, committed and deterministic: ``events.jsonl``, ``queries.jsonl``
(style ``hard``, qids ``h-<user>-<agent>-NNN``) and ``qrels.tsv``, so that
``bench.dialogue_eval --corpus hard`` runs it.
"""

from __future__ import annotations

from pathlib import Path

from bench.dialogue_check import build as check

HERE = Path(__file__).resolve().parent
STYLE_TAG = ("hard", "h")


def memory_id(user: str, agent: str, n: int) -> str:
    return f"hd-{user}-{agent}-{n:02d}"


def events(names: dict[str, str]) -> list[dict]:
    return check.events(names, HERE, memory_id)


def queries(names: dict[str, str], known: set[str]) -> list[dict]:
    return check.queries(names, known, HERE, STYLE_TAG, memory_id)


def main() -> None:
    check.build(HERE, STYLE_TAG, memory_id)


if __name__ == "__main__":
    main()
