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
from kemem_es.store.scope import Scope

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


def test_a_window_prepared_in_one_process_is_adopted_in_another(kemem: Kemem) -> None:
    """Two Kemem instances (two workers: each its own window cache) on one index: the one
    that took the add prepares the window and writes it onto the session's state; the other
    answers the next message without embedding the window, with the same memories."""
    kemem.init()
    texts = lines()
    for i in range(0, 6, 2):  # memories to recall
        kemem.add(texts[i], user_id=A["user_id"], agent_id=A["agent_id"], refresh=True)
    first = Kemem(kemem.settings)
    first.embedder = kemem.embedder
    other = Kemem(kemem.settings)
    counting = Counting(kemem.embedder)
    other.embedder = counting  # type: ignore[assignment]
    try:
        for said, reply in turns_of(texts)[:3]:
            first.add(
                [{"role": "user", "content": said}, {"role": "assistant", "content": reply}],
                session_id="w3",
                **A,
            )
        for job in list(first.sessions._jobs.values()):
            job.result(timeout=30)
        scope = Scope.of(agent_id=A["agent_id"], user_id=A["user_id"])
        state = first.sessions.store.state(scope, "w3")
        assert state is not None and state.source["window_vector"]["vector"]
        message = texts[7]
        got = other.context(message, session_id="w3", score_threshold=0, **A)
        windows = [t for t in counting.seen if "\n" in t]
        assert windows == [], "the other process embedded the window itself"
        want = first.context(message, session_id="w3", score_threshold=0, **A)
        assert [e.index for e in got.events] == [e.index for e in want.events]
        assert got.text == want.text
    finally:
        first.close()
        other.close()


def test_a_window_vector_for_a_state_that_changed_is_not_written(kemem: Kemem) -> None:
    kemem.init()
    scope = Scope.of(agent_id=A["agent_id"], user_id=A["user_id"])
    said, reply = turns_of(lines())[0]
    turn = [{"role": "user", "content": said}, {"role": "assistant", "content": reply}]
    kemem.add(turn, session_id="w4", **A)
    store = kemem.sessions.store
    old = store.state(scope, "w4")
    assert old is not None
    kemem.add(turn[:1], session_id="w4", **A)  # a newer add replaces the state
    rec = {"digest": "x", "model": "m", "vector": [0.1, 0.2]}
    assert store.put_window(scope, "w4", rec, old) is False
    now = store.state(scope, "w4")
    assert now is not None and now.source.get("window_vector") != rec
    kemem.delete_session("w4", user_id=A["user_id"], agent_id=A["agent_id"])
    assert store.put_window(scope, "w4", rec, now) is False  # the session is gone
    assert store.state(scope, "w4") is None
