"""The dialogue set's long chats as a chat app sends them: each user turn of
bench/dialogue/long_*.txt in order (four users, 126 user turns each, in blocks), with its
block's earlier turns as the query's context. The reinforcement studies replay them
(bench/results/2026-11-30-coalesce, 2026-11-30-official)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent / "dialogue"
CONTEXT_TURNS = 8


def user_turns() -> Iterator[tuple[str, str, str, str]]:
    """(agent, user, the user's turn, its context: the block's last ``CONTEXT_TURNS`` turns
    before it, one ``用户：…`` / ``助手：…`` line each)."""
    for path in sorted(HERE.glob("long_*.txt")):
        agent = user = ""
        block: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("=="):
                _, agent, user, *_ = line.split()
            elif line.startswith("@"):
                block = []
            elif line[:2] in ("U ", "A "):
                text = line[2:].strip()
                if line[0] == "U":
                    yield agent, user, text, "\n".join(block[-CONTEXT_TURNS:])
                block.append(("用户：" if line[0] == "U" else "助手：") + text)
