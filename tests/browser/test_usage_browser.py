"""The proxy's token usage on the dashboard, in a real browser (chromium through chromedriver,
as tests/browser/test_dashboard_browser.py; skipped where they are missing): after chat calls
through the proxy to the loopback upstream stub, a key for one agent sees that agent's prompt,
completion and memory tokens on the Overview tab, and not the other agent's. A screenshot goes
to ``$KEMEM_TEST_ARTIFACTS`` (dashboard-usage.png)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

from proxy_stub import Upstream, memory_store, proxy_env, serve_upstream  # noqa: E402
from support import serve_process  # noqa: E402
from test_dashboard_browser import _require_browser, _screenshot, _wait, browser  # noqa: E402,F401

from kemem_es import Kemem  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
KEYS = {"key-a": ["agent_a"], "key-b": ["agent_b"]}


@pytest.fixture(scope="module")
def store(engine_settings: Any, embedder: Any) -> Iterator[Kemem]:
    _require_browser()
    with memory_store(engine_settings, embedder) as km:
        yield km


@pytest.fixture(scope="module")
def server(store: Kemem) -> Iterator[str]:
    with serve_upstream() as up, serve_process(_env(store, up), up_within_s=240) as url:
        yield url


def _env(store: Kemem, up: Upstream) -> dict[str, str]:
    env = proxy_env(store, up, KEYS)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _chat(url: str, key: str, agent: str) -> Any:
    c = openai.OpenAI(
        base_url=f"{url}/v1",
        api_key=key,
        max_retries=0,
        default_headers={"X-Kemem-User-Id": "u1", "X-Kemem-Agent-Id": agent},
    )
    return c.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "豆包最近怎么样？"}]
    )


@pytest.mark.engine
def test_usage_on_the_dashboard(server: str, browser: Any) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By

    answer = _chat(server, "key-a", "agent_a")
    memory = answer.to_dict()["memory_info"]["tokens"]["total"]
    assert memory > 0
    _chat(server, "key-b", "agent_b")
    d = browser
    d.get(f"{server}/dashboard")
    d.find_element(By.ID, "api-key").send_keys("key-a")
    d.find_element(By.ID, "key-save").click()
    row = "#ov-usage tbody tr[data-agent='agent_a'][data-user='u1']"
    _wait(d, lambda drv: drv.find_elements(By.CSS_SELECTOR, row), "no usage row for agent_a")
    cells = {
        td.get_attribute("data-col"): td.text
        for td in d.find_elements(By.CSS_SELECTOR, f"{row} td[data-col]")
    }
    # the stub answers usage 50 prompt + 7 completion tokens per call
    assert cells == {
        "requests": "1",
        "prompt_tokens": "50",
        "completion_tokens": "7",
        "memory_tokens": str(memory),
    }
    rows = d.find_elements(By.CSS_SELECTOR, "#ov-usage tbody tr")
    agents = {r.get_attribute("data-agent") for r in rows}
    assert agents == {"agent_a"}  # key A does not see agent B's usage
    assert _screenshot(d, "usage").exists()
