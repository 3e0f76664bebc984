"""The dashboard's Sessions tab in a real browser (chromium through chromedriver, as in
tests/test_dashboard_browser.py; skipped where they are missing): an operator key, a user's
sessions listed, one opened (its messages), the next turn's context built with the tokens of
each part. A screenshot goes to ``$KEMEM_TEST_ARTIFACTS`` (dashboard-sessions.png)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from dashboard_support import drop, make_kemem
from support import serve_process
from test_dashboard_browser import _require_browser, _screenshot, _wait, browser  # noqa: F401

from kemem_es import Kemem

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "bench" / "session_fallback" / "dialogue_30.jsonl"
KEY, AGENT, USER = "k-qiyu-sessions", "qiyu", "u_mumu"


@pytest.fixture(scope="module")
def chat(engine_settings: Any, embedder: Any) -> Iterator[Kemem]:
    _require_browser()
    km = make_kemem(engine_settings, embedder)
    km.init()
    rows = [json.loads(x) for x in DATA.read_text(encoding="utf-8").splitlines()][:12]
    turns = [{"role": r["role"], "content": r["content"]} for r in rows]
    km.add(
        turns,
        session_id="s-demo",
        user_id=USER,
        agent_id=AGENT,
        user_name="木木",
        agent_name="祁煜",
    )
    yield km
    drop(km)


@pytest.fixture(scope="module")
def server(chat: Kemem) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEMEM_SERVER_")}
    env.update(
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        KEMEM_INDEX_PREFIX=chat.settings.index_prefix,
        KEMEM_MODEL_DIR=str(chat.settings.model_dir),
        KEMEM_ES_URL=chat.settings.url,
        KEMEM_SERVER_API_KEYS=json.dumps({KEY: [AGENT]}),
    )
    with serve_process(env) as url:
        yield url


@pytest.mark.engine
def test_sessions_tab(server: str, browser: Any) -> None:  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    d = browser
    d.get(f"{server}/dashboard")
    d.find_element(By.ID, "api-key").send_keys(KEY)
    d.find_element(By.ID, "key-save").click()
    d.find_element(By.ID, "tab-sessions").click()
    agent = d.find_element(By.ID, "ses-agent")
    agent.clear()
    agent.send_keys(AGENT)
    d.find_element(By.ID, "ses-user").send_keys(USER)
    d.find_element(By.ID, "ses-list").click()
    _wait(d, lambda drv: drv.find_elements(By.CSS_SELECTOR, "#ses-table tbody tr"), "no listing")
    assert not d.find_element(By.ID, "error").text
    opener = _wait(
        d,
        ec.element_to_be_clickable((By.CSS_SELECTOR, "#ses-table button.open")),
        "no session listed",
    )
    opener.click()
    _wait(
        d,
        lambda drv: len(drv.find_elements(By.CSS_SELECTOR, "#ses-messages tbody tr")) == 12,
        "the session's 12 messages are not shown",
    )
    dev = (DATA.parent / "dev.jsonl").read_text(encoding="utf-8").splitlines()
    message = json.loads(dev[0])["content"]
    d.find_element(By.ID, "ses-message").send_keys(message)
    d.find_element(By.ID, "ses-context-run").click()
    text = _wait(d, ec.visibility_of_element_located((By.ID, "ses-text")), "no context").text
    assert text.splitlines()[-1] == f"木木：{message}"
    assert "total" in d.find_element(By.ID, "ses-tokens").text
    shot = _screenshot(d, "sessions")
    assert shot.exists()
