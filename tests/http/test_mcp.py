"""The MCP server driven by the official SDK's own client: over stdio (`kemem-es mcp`) and over
streamable HTTP (`kemem-es serve`, /mcp), against the real engine: list the tools, remember,
recall, forget, and the scope (a key's agents, the configured user and agent) holding."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from support import cli_env, serve_process  # noqa: E402

from kemem_es import Kemem  # noqa: E402

TOOLS = {"remember", "recall", "context", "forget", "list_memories"}
KEYS = {"key-a": ["agent_a"], "key-b": ["agent_b"]}


def _json(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def _error(result: Any) -> str:
    assert result.is_error, result.content
    return result.content[0].text


def _http_client(url: str, key: str) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))


@pytest.mark.engine
def test_mcp_over_http_keeps_each_key_to_its_agents(kemem: Kemem) -> None:
    kemem.init()
    env = cli_env(kemem, KEMEM_SERVER_API_KEYS=json.dumps(KEYS), KEMEM_DEFAULT_AGENT_ID="agent_a")

    async def run(url: str) -> None:
        async with _http_client(url, "key-a") as a:
            tools = {t.name for t in (await a.list_tools()).tools}
            assert tools >= TOOLS
            text = "木木养了一只叫豆包的柯基，每天早上带它去公园散步"
            stored = _json(await a.call_tool("remember", {"text": text, "user_id": "u1"}))
            mid = stored["results"][0]["id"]
            got = _json(
                await a.call_tool(
                    "recall", {"query": "豆包还好吗", "user_id": "u1", "threshold": 0.0}
                )
            )
            assert [i["id"] for i in got["items"]][:1] == [mid]
            assert "豆包" in got["prompt"]
            # an agent the key does not serve: refused, whatever the argument says
            why = _error(
                await a.call_tool(
                    "remember", {"text": "偷偷写给别的角色", "user_id": "u1", "agent_id": "agent_b"}
                )
            )
            assert "agent_id" in why
            # validated like the HTTP API: a limit out of range is an error naming it
            assert "limit" in _error(
                await a.call_tool("recall", {"query": "豆包", "user_id": "u1", "limit": 0})
            )
        async with _http_client(url, "key-b") as b:
            # key B cannot read agent A's memories (its default agent is not its own)
            assert "agent_id" in _error(
                await b.call_tool("recall", {"query": "豆包", "user_id": "u1"})
            )
            own = _json(
                await b.call_tool(
                    "recall",
                    {"query": "豆包", "user_id": "u1", "agent_id": "agent_b", "threshold": 0.0},
                )
            )
            assert own["items"] == []
            assert "not_found" in _error(
                await b.call_tool(
                    "forget", {"memory_id": mid, "user_id": "u1", "agent_id": "agent_b"}
                )
            )
        async with _http_client(url, "key-a") as a:
            gone = _json(await a.call_tool("forget", {"memory_id": mid, "user_id": "u1"}))
            assert gone["deleted"] == mid
            left = _json(await a.call_tool("list_memories", {"user_id": "u1"}))
            assert left["results"] == []
        # no key: refused before the MCP transport sees the request
        r = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert r.status_code == 401

    with serve_process(env, up_within_s=240) as url:
        asyncio.run(run(url))


@pytest.mark.engine
def test_mcp_over_stdio_serves_its_configured_user_and_agent(kemem: Kemem) -> None:
    kemem.init()
    env = cli_env(kemem)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kemem_es.cli.app", "mcp", "--user", "u1", "--agent", "agent_a"],
        env=env,
    )

    async def run() -> None:
        async with Client(params, read_timeout_seconds=120) as c:
            assert {t.name for t in (await c.list_tools()).tools} >= TOOLS
            stored = _json(await c.call_tool("remember", {"text": "小满周末要去杭州西湖划船"}))
            mid = stored["results"][0]["id"]
            got = _json(await c.call_tool("recall", {"query": "西湖划船", "threshold": 0.0}))
            assert [i["id"] for i in got["items"]][:1] == [mid]
            ctx = _json(await c.call_tool("context", {"message": "西湖好玩吗", "max_tokens": 500}))
            assert "西湖" in ctx["text"] and 0 < ctx["tokens"]["total"] <= 500
            assert "user_id" in _error(
                await c.call_tool("recall", {"query": "西湖", "user_id": "u2"})
            )
            assert "agent_id" in _error(
                await c.call_tool("recall", {"query": "西湖", "agent_id": "agent_b"})
            )
            assert _json(await c.call_tool("forget", {"memory_id": mid}))["deleted"] == mid

    asyncio.run(run())
    left = kemem.get_all(user_id="u1", agent_id="agent_a")
    assert left.results == []
