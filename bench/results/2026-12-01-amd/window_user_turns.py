"""Experiment (not adopted): the joint window's text made of the user's turns only.

    python bench/results/2026-12-01-amd/window_user_turns.py --corpus hard --distractors \
        --modes fusion --reuse --prefix PREFIX --out OUT.json

Runs ``bench.dialogue_eval`` with ``search.query_text.dialogue_window`` dropping every turn
whose speaker is one of the sets' agents (a turn with role ``agent``); the earlier turns' search
words are left as they are.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import kemem_es.search.query_text as qt
from bench import dialogue_eval
from kemem_es.text.dialogue import Turn

BENCH = Path(__file__).resolve().parents[2]


def agent_speakers() -> set[str]:
    names: set[str] = set()
    for path in BENCH.glob("dialogue*/queries.jsonl"):
        with path.open(encoding="utf-8") as f:
            for line in f:
                for t in json.loads(line).get("turns") or []:
                    if t.get("role") == "agent" and t.get("speaker"):
                        names.add(t["speaker"])
    return names


def main() -> int:
    agents = agent_speakers()
    window = qt.dialogue_window

    def user_turns_only(
        utterance: str, turns: list[Turn], budget: int, length: Callable[[str], int] = len
    ) -> tuple[str, bool]:
        return window(utterance, [t for t in turns if t.speaker not in agents], budget, length)

    qt.dialogue_window = user_turns_only  # type: ignore[assignment]
    return dialogue_eval.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
