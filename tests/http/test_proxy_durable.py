"""What the proxy keeps across a restart of `kemem-es serve` (a real process stopped and
started again on the same store): a `previous_response_id` chain continues in its session, a
response id is found only within its own agent and user (another key's agent, another user:
404, nothing forwarded), and the usage counts per agent and user are still there."""

from __future__ import annotations

from typing import Any

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")

from proxy_stub import ANSWER, Upstream, proxy_env  # noqa: E402
from support import serve_process  # noqa: E402
from test_proxy import _stored, store, upstream  # noqa: E402,F401

from kemem_es import Kemem  # noqa: E402

KEYS = {"key-a": ["agent_a"], "key-b": ["agent_b"], "key-root": ["*"]}
pytestmark = pytest.mark.engine


def _env(km: Kemem, up: Upstream) -> dict[str, str]:
    return proxy_env(km, up, KEYS)


def _client(url: str, key: str, agent: str, user: str = "u1") -> Any:
    headers = {"X-Kemem-User-Id": user, "X-Kemem-Agent-Id": agent}
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, default_headers=headers, max_retries=0)


def _usage(url: str, key: str) -> dict[tuple[str, str], dict[str, int]]:
    r = httpx.get(f"{url}/v1/usage", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert r.status_code == 200, r.text
    return {(row["agent_id"], row["user_id"]): row for row in r.json()["results"]}


def test_a_response_chain_and_the_usage_outlive_a_restart(
    store: Kemem,  # noqa: F811
    upstream: Upstream,  # noqa: F811
) -> None:
    with serve_process(_env(store, upstream), up_within_s=240) as url:
        first = _client(url, "key-a", "agent_a").responses.create(
            model="m", input="豆包最近怎么样？"
        )
        _client(url, "key-b", "agent_b").chat.completions.create(
            model="m", messages=[{"role": "user", "content": "在吗"}]
        )
        before = _usage(url, "key-root")
    session = first.to_dict()["memory_info"]["session_id"]
    assert before[("agent_a", "u1")]["requests"] == 1
    assert before[("agent_a", "u1")]["prompt_tokens"] > 0

    upstream.reset()
    with serve_process(_env(store, upstream), up_within_s=240) as url:
        # after the restart: the chain goes on in its session
        second = _client(url, "key-a", "agent_a").responses.create(
            model="m", input="它喜欢去哪儿玩？", previous_response_id=first.id
        )
        assert second.output_text == "".join(ANSWER)
        assert second.to_dict()["memory_info"]["session_id"] == session
        # another key's agent, or another user of the same agent: not that response
        for key, agent, user in (("key-b", "agent_b", "u1"), ("key-a", "agent_a", "u2")):
            with pytest.raises(openai.NotFoundError) as caught:
                _client(url, key, agent, user).responses.create(
                    model="m", input="继续", previous_response_id=first.id
                )
            assert caught.value.response.json()["error"]["field"] == "previous_response_id"
        assert len(upstream.requests) == 1  # the refused ones were not forwarded
        after = _usage(url, "key-root")
        mine = _usage(url, "key-a")
    assert after[("agent_a", "u1")]["requests"] == 2
    assert after[("agent_b", "u1")] == before[("agent_b", "u1")]
    assert after[("agent_a", "u1")]["prompt_tokens"] > before[("agent_a", "u1")]["prompt_tokens"]
    assert set(mine) == {("agent_a", "u1")}  # a key sees its own agents' counts
    turns = _stored(store, session, 4)
    assert [t.content for t in turns][::2] == ["豆包最近怎么样？", "它喜欢去哪儿玩？"]
