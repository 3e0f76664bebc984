"""The proxy's bookkeeping without an engine: one agent rule for every way in (HTTP, proxy,
MCP), a cached response id found only in its own agent and user, and usage counts that are
kept (not lost) while the store cannot be written."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("fastapi")

from kemem_es.errors import EngineUnavailable, Forbidden
from kemem_es.server.access import OPEN, Access
from kemem_es.server.proxy.durable import Chains, UsageBook


class NoStore:
    """An AsyncKemem whose store is down: every call through its bridge fails."""

    def __init__(self) -> None:
        self.calls = 0
        self._bridge = self
        self.core = self

    async def run(self, fn: Any, *args: Any) -> Any:
        self.calls += 1
        raise EngineUnavailable("down")


def test_one_agent_rule() -> None:
    key = Access(frozenset({"agent_a"}))
    assert key.agent(None, "agent_a") == "agent_a"
    with pytest.raises(Forbidden) as caught:
        key.agent("agent_b", "agent_a")
    assert caught.value.field == "agent_id"
    with pytest.raises(Forbidden):
        key.agent(None, "agent_b")  # the default is checked too
    assert OPEN.agent("anyone", "agent_a") == "anyone"


def test_a_cached_response_id_is_found_in_its_own_scope_only() -> None:
    km: Any = NoStore()
    chains = Chains()
    chains.remember("resp_1", "agent_a", "u1", "s-1")

    async def look(agent: str, user: str | None) -> str | None:
        return await chains.session_of(km, "resp_1", agent, user)

    assert asyncio.run(look("agent_a", "u1")) == "s-1"
    assert asyncio.run(look("agent_b", "u1")) is None
    assert asyncio.run(look("agent_a", "u2")) is None
    assert asyncio.run(look("agent_a", None)) is None
    assert km.calls == 0  # answered from the cache, no store read


def test_usage_waits_for_the_store_and_is_shown_meanwhile() -> None:
    km: Any = NoStore()
    book = UsageBook()

    async def run() -> tuple[list[dict[str, Any]], str | None]:
        book.count(km, ("agent_a", "u1"), {"requests": 1, "prompt_tokens": 50})
        book.count(km, ("agent_b", "u1"), {"requests": 1, "prompt_tokens": 9})
        assert book.task is not None
        assert await book.task is False  # the write failed: kept
        book.count(km, ("agent_a", "u1"), {"requests": 1, "completion_tokens": 7})
        await book.task
        return await book.rows(km, frozenset({"agent_a"}), None, None)

    rows, degraded = asyncio.run(run())
    assert degraded
    assert rows == [
        {"agent_id": "agent_a", "user_id": "u1", "requests": 2, "prompt_tokens": 50,
         "completion_tokens": 7, "memory_tokens": 0},
    ]  # fmt: skip
