"""A message sent right after the last add: the context waits for, or takes over, the window
job the add started, so the session's window is embedded once per turn — on the sync API and
on AsyncKemem (whose job needs the event loop the waiting context runs on)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kemem_es import AsyncKemem, Kemem

pytestmark = pytest.mark.engine

DATA = Path(__file__).resolve().parents[2] / "bench" / "session_fallback"
A = {"user_id": "u_win", "agent_id": "qiyu", "user_name": "木木", "agent_name": "祁煜"}


def lines() -> list[str]:
    rows = (DATA / "dialogue_30.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(r)["content"] for r in rows]


class Counting:
    """The embedder, counting each query-side text it embeds."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seen: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        self.seen.update(texts)
        return np.asarray(self.inner.embed_queries(texts))


def turns_of(texts: list[str]) -> list[tuple[str, str]]:
    return [(texts[i], texts[i + 1]) for i in range(0, 12, 2)]


def test_sync_contexts_right_after_each_add(kemem: Kemem) -> None:
    kemem.init()
    counting = Counting(kemem.embedder)
    km = Kemem(kemem.settings)
    km.embedder = counting  # type: ignore[assignment]
    try:
        for said, reply in turns_of(lines()):
            ctx = km.context(said, session_id="w1", **A)
            assert ctx.text
            km.add(
                [{"role": "user", "content": said}, {"role": "assistant", "content": reply}],
                session_id="w1",
                **A,
            )
        windows = {t: n for t, n in counting.seen.items() if "\n" in t}
        assert windows, "the session's windows were embedded"
        assert max(windows.values()) == 1, windows  # each window once
    finally:
        km.close()


def test_async_contexts_right_after_each_add(kemem: Kemem) -> None:
    kemem.init()
    counting = Counting(kemem.embedder)

    async def go() -> None:
        async with AsyncKemem(kemem.settings) as akm:
            akm.core.embedder = counting
            for said, reply in turns_of(lines()):
                ctx = await asyncio.wait_for(akm.context(said, session_id="w2", **A), 30)
                assert ctx.text
                await akm.add(
                    [{"role": "user", "content": said}, {"role": "assistant", "content": reply}],
                    session_id="w2",
                    **A,
                )

    asyncio.new_event_loop().run_until_complete(go())
    windows = {t: n for t, n in counting.seen.items() if "\n" in t}
    assert windows and max(windows.values()) == 1, windows
