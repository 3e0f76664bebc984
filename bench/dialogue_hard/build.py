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

from bench.dialogue_check.build import BriefSet

SET = BriefSet(Path(__file__).resolve().parent, "hd", ("hard", "h"))
HERE, events, queries, main = SET.folder, SET.events, SET.queries, SET.build


if __name__ == "__main__":
    main()
