"""The dashboard in a real browser: Debian's chromium driven through chromedriver (selenium),
against a real ``kemem-es serve`` process and the real engine with the demo corpus indexed under
a fresh prefix, plus one memory whose text is markup.

Checks what a person would: the key is entered in the page (an operator key for one agent), the
overview shows that agent's counts only, the explorer finds the expected top memory with its
signal bars, a memory's history opens, a delete asks first, and the markup memory renders as
literal text with no script run. Screenshots of each page go to ``$KEMEM_TEST_ARTIFACTS`` (default
``tests/artifacts/``).

No browser is downloaded: selenium is given ``/usr/bin/chromedriver`` and ``/usr/bin/chromium``
(``.ci/run`` installs them with apt). Where they are missing the test is skipped, unless
``KEMEM_REQUIRE_BROWSER=1`` (CI sets it), which makes that a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from dashboard_support import drop, make_kemem  # noqa: E402
from support import serve_process  # noqa: E402

from kemem_es import Kemem  # noqa: E402
from kemem_es.kemem import DEMO_FILES, demo_path  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("KEMEM_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("KEMEM_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
ARTIFACTS = Path(os.environ.get("KEMEM_TEST_ARTIFACTS", REPO / "tests" / "artifacts"))
KEY = "k-qiyu-operator"
AGENT, USER = "qiyu", "u_mumu"
QUERY = "小雨又想吃火锅了"
# the demo's three hot-pot nights with 小雨 (which leads: the one whose sentence is nearest)
TOP = {f"ev-u_mumu-qiyu-{n}" for n in ("0008", "0050", "0058")}
XSS = '<script>alert(1)</script><img src=x onerror="window.__xss=1">'
XSS_TEXT = f"{XSS}木木在便签上抄了一行网页代码"
WAIT_S = 60


def _browser_missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (Path(path).exists() or shutil.which(path)):
            return f"{path} is missing (apt-get install chromium chromium-driver)"
    return None


def _require_browser() -> None:
    why = _browser_missing()
    if why is None:
        return
    if os.environ.get("KEMEM_REQUIRE_BROWSER") == "1":
        pytest.fail(f"the browser test must run here: {why}")
    pytest.skip(why)


@pytest.fixture(scope="module")
def demo(engine_settings: Any, embedder: Any) -> Iterator[Kemem]:
    """The demo corpus and the markup memory under a fresh ``dash-`` prefix."""
    _require_browser()
    km = make_kemem(engine_settings, embedder)
    km.index_demo()
    km.add(XSS_TEXT, user_id=USER, agent_id=AGENT, refresh=True, dedup=False)
    for name in km.engine.client.indices.get(index=f"{km.settings.index_prefix}-*"):
        km.engine.refresh(name)
    yield km
    drop(km)


@pytest.fixture(scope="module")
def server(demo: Kemem) -> Iterator[str]:
    """``kemem-es serve`` on a free loopback port, with an operator key for qiyu only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEMEM_SERVER_")}
    env.update(
        PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        KEMEM_INDEX_PREFIX=demo.settings.index_prefix,
        KEMEM_MODEL_DIR=str(demo.settings.model_dir),
        KEMEM_ES_URL=demo.settings.url,
        KEMEM_REINFORCE="false",
        KEMEM_SERVER_API_KEYS=json.dumps({KEY: [AGENT], "k-root": ["*"]}),
    )
    with serve_process(env) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which(CHROMIUM) or CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root in a container
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        "--lang=zh-CN",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(
        service=Service(shutil.which(CHROMEDRIVER) or CHROMEDRIVER), options=options
    )
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


def _wait(driver: Any, what: Any, message: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT_S, poll_frequency=0.2).until(what, message)


def _screenshot(driver: Any, name: str) -> Path:
    """The whole page (not just the window), so a long explorer answer is in the picture."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, min(max(int(height) + 120, 1000), 6000))
    path = ARTIFACTS / f"dashboard-{name}.png"
    assert driver.save_screenshot(str(path)), path
    driver.set_window_size(1400, 1000)
    return path


def _no_alert(driver: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert  # noqa: B018
    assert driver.execute_script("return window.__xss === undefined")


def _expected_counts() -> tuple[int, int]:
    """(qiyu's memories, lishen's) in the demo corpus, plus the markup memory for qiyu."""
    counts = {"qiyu": 0, "lishen": 0}
    for name, _, _ in DEMO_FILES:
        for line in demo_path(name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                counts[json.loads(line)["agent_id"]] += 1
    return counts["qiyu"] + 1, counts["lishen"]


@pytest.mark.engine
@pytest.mark.es_node_lacks(
    "Painless: the explorer's per-signal bars read explain's breakdown of the script score"
)
def test_dashboard_in_a_browser(server: str, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select

    d = browser
    qiyu_total, lishen_total = _expected_counts()
    d.get(f"{server}/dashboard")
    # Keys are configured and none is entered yet: the API answers 401 and the page says so.
    error = _wait(d, ec.visibility_of_element_located((By.ID, "error")), "no 401 shown")
    assert "401" in error.text
    d.find_element(By.ID, "api-key").send_keys(KEY)
    d.find_element(By.ID, "key-save").click()
    assert d.find_element(By.ID, "api-key").get_attribute("value") == ""  # not left on screen
    assert KEY not in d.current_url
    assert d.execute_script("return sessionStorage.getItem('kemem.dashboard.key')") == KEY

    # -- overview: the operator key's agent only ------------------------------------------
    total = _wait(
        d, ec.visibility_of_element_located((By.CSS_SELECTOR, "#ov-total .v")), "no overview"
    )
    assert int(total.text) == qiyu_total, (total.text, qiyu_total, lishen_total)
    agents = {td.text for td in d.find_elements(By.CSS_SELECTOR, "#ov-scopes tbody td:first-child")}
    assert agents == {AGENT}
    users = {
        r.get_attribute("data-user")
        for r in d.find_elements(By.CSS_SELECTOR, "#ov-scopes tbody tr")
    }
    assert users == {"", "u_mumu", "u_chengcheng"}
    assert len(d.find_elements(By.CSS_SELECTOR, "#ov-strength svg rect")) == 8
    cards = d.find_element(By.ID, "ov-cards").text.lower()  # the engine and its version
    assert re.search(r"(opensearch|elasticsearch) \d+\.\d+", cards), cards
    _wait(d, lambda drv: drv.find_elements(By.CSS_SELECTOR, "#ov-live .card"), "no live metrics")

    # -- explorer: fusion next to rrf -----------------------------------------------------
    d.find_element(By.ID, "tab-explorer").click()
    d.find_element(By.ID, "ex-query").send_keys(QUERY)
    agent = d.find_element(By.ID, "ex-agent")
    agent.clear()
    agent.send_keys(AGENT)
    d.find_element(By.ID, "ex-user").send_keys(USER)
    d.find_element(By.ID, "ex-user-name").send_keys("木木")
    d.find_element(By.ID, "ex-agent-name").send_keys("祁煜")
    Select(d.find_element(By.ID, "ex-mode-b")).select_by_value("rrf")
    d.find_element(By.ID, "ex-run").click()
    first = _wait(
        d,
        ec.visibility_of_element_located((By.CSS_SELECTOR, '.run[data-mode="fusion"] .hit')),
        "no explorer result",
    )
    assert first.get_attribute("data-id") in TOP
    assert "火锅" in first.find_element(By.CSS_SELECTOR, ".text").text
    bar_width = d.execute_script(
        "return arguments[0].getBoundingClientRect().width",
        first.find_element(By.CSS_SELECTOR, ".sigbar"),
    )
    for signal in ("kw", "vec"):
        seg = first.find_element(By.CSS_SELECTOR, f".sigbar .seg.{signal}")
        width = d.execute_script("return arguments[0].getBoundingClientRect().width", seg)
        assert width > 0.2 * bar_width, (signal, width, bar_width)  # both carry this memory
    assert first.find_elements(By.CSS_SELECTOR, ".sigbar .thr")
    assert first.find_elements(By.CSS_SELECTOR, '.sigvals [data-signal="vec"]')
    # what a memory's best sentence added: a segment of its own, and its value
    assert first.find_elements(By.CSS_SELECTOR, ".sigbar .seg.sentence")
    assert first.find_elements(By.CSS_SELECTOR, '.sigvals [data-signal="sentence"]')
    rrf = d.find_element(By.CSS_SELECTOR, '.run[data-mode="rrf"]')
    assert rrf.find_elements(By.CSS_SELECTOR, ".hit")
    fusion = d.find_element(By.CSS_SELECTOR, '.run[data-mode="fusion"]')
    assert "吃火锅" in fusion.find_element(By.CSS_SELECTOR, ".chips.base").text
    assert fusion.find_elements(By.CSS_SELECTOR, ".chips.expansions .chip .lv")
    assert fusion.find_elements(By.CSS_SELECTOR, ".tier .chip")  # matched words of an entity
    prompt = fusion.find_element(By.CSS_SELECTOR, "pre.prompt").text
    assert prompt.startswith("脑海中回想起的片段：") and "火锅" in prompt
    assert "total" in fusion.find_element(By.CSS_SELECTOR, "table.timings").text
    _screenshot(d, "explorer")

    # Anchor feedback: 跑步 has one clear answer (小雨's gym card); at threshold 0 the other
    # hits show what closeness to it added, as a segment of their own
    query = d.find_element(By.ID, "ex-query")
    query.clear()
    query.send_keys("跑步")
    threshold = d.find_element(By.ID, "ex-threshold")
    threshold.clear()
    threshold.send_keys("0")
    d.find_element(By.ID, "ex-run").click()
    _wait(
        d,
        lambda drv: drv.find_elements(
            By.CSS_SELECTOR, '.run[data-mode="fusion"] .hit .sigbar .seg.anchor'
        ),
        "no anchor segment",
    )
    fusion = d.find_element(By.CSS_SELECTOR, '.run[data-mode="fusion"]')
    hits = fusion.find_elements(By.CSS_SELECTOR, ".hit")
    assert not hits[0].find_elements(By.CSS_SELECTOR, ".seg.anchor")  # the anchor gains nothing
    assert hits[1].find_elements(By.CSS_SELECTOR, '.sigvals [data-signal="anchor"]')

    # The overview's live panel now has /query's stages (the explorer's queries are not chat
    # traffic, so run one through /query like a chat backend would).
    r = httpx.post(
        f"{server}/query",
        json={"query": QUERY, "user_id": USER, "agent_id": AGENT},
        headers={"Authorization": f"Bearer {KEY}"},
        timeout=30,
    )
    assert r.status_code == 200
    d.find_element(By.ID, "tab-overview").click()
    # Server-wide traffic is an operator's of every agent: this key's live panel says so ...
    _wait(
        d,
        lambda drv: "operator keys only" in drv.find_element(By.ID, "ov-live").text,
        "the live panel is not hidden from a key of one agent",
    )
    assert not d.find_elements(By.CSS_SELECTOR, '#ov-stages tr[data-stage="total"]')
    # ... and a key of every agent sees /query's stages.
    d.find_element(By.ID, "api-key").send_keys("k-root")
    d.find_element(By.ID, "key-save").click()
    _wait(
        d,
        lambda drv: drv.find_elements(By.CSS_SELECTOR, '#ov-stages tr[data-stage="total"]'),
        "no stage percentiles",
    )
    _screenshot(d, "overview")
    d.find_element(By.ID, "api-key").send_keys(KEY)  # the rest: the key of one agent again
    d.find_element(By.ID, "key-save").click()

    # -- memory browser: the markup memory is text, its history opens -----------------------
    d.find_element(By.ID, "tab-memories").click()
    agent = d.find_element(By.ID, "mem-agent")
    agent.clear()
    agent.send_keys(AGENT)
    d.find_element(By.ID, "mem-user").send_keys(USER)
    limit = d.find_element(By.ID, "mem-limit")
    limit.clear()
    limit.send_keys("12")  # the newest first: the markup memory is among them
    d.find_element(By.ID, "mem-list").click()
    _wait(
        d,
        lambda drv: len(drv.find_elements(By.CSS_SELECTOR, "#mem-table tbody tr[data-id]")) > 1,
        "no list",
    )
    rows = d.find_elements(By.CSS_SELECTOR, "#mem-table tbody tr[data-id]")
    marked = [r for r in rows if XSS in r.find_element(By.CSS_SELECTOR, "td.text").text]
    assert len(marked) == 1, [r.text for r in rows[:5]]
    assert len(rows) == 12 and d.find_element(By.ID, "mem-more").is_displayed()  # paged
    assert not d.find_elements(By.CSS_SELECTOR, "#mem-table script, #mem-table img")
    _no_alert(d)
    marked[0].find_element(By.CSS_SELECTOR, "button.open").click()
    text = _wait(
        d,
        ec.visibility_of_element_located((By.CSS_SELECTOR, '#mem-fields dd[data-field="text"]')),
        "no memory detail",
    )
    assert text.text == XSS_TEXT
    _wait(
        d,
        lambda drv: drv.find_elements(By.CSS_SELECTOR, '#mem-history tr[data-event="ADD"]'),
        "no history",
    )
    assert not d.find_elements(By.CSS_SELECTOR, "#mem-detail script, #mem-detail img")
    _no_alert(d)
    _screenshot(d, "memories")

    # Delete asks first, then the history records it and the memory is gone.
    memory_id = marked[0].get_attribute("data-id")
    d.find_element(By.ID, "mem-delete").click()
    d.find_element(By.ID, "mem-delete-confirm").click()
    _wait(d, ec.visibility_of_element_located((By.ID, "mem-deleted")), "not deleted")
    _wait(
        d,
        lambda drv: drv.find_elements(By.CSS_SELECTOR, '#mem-history tr[data-event="DELETE"]'),
        "no DELETE",
    )
    gone = httpx.get(
        f"{server}/v1/memories/{memory_id}",
        params={"user_id": USER, "agent_id": AGENT},
        headers={"Authorization": f"Bearer {KEY}"},
    )
    assert gone.status_code == 404

    severe = [
        e["message"]
        for e in d.get_log("browser")
        if e["level"] == "SEVERE" and "401" not in e["message"]
    ]
    assert severe == [], severe  # no script errors, no CSP violations


@pytest.mark.engine
def test_load_more_goes_on_with_the_listing_shown(server: str, browser: Any) -> None:
    """ "Load more" used to send the listing's cursor with whatever the form said by then: kind
    set to entities after an events listing appended more events (the cursor's point in time)
    under the old rows, whose "open" and "delete" then used the new form's scope. After the form
    changed it starts the form's listing instead."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    d = browser
    d.get(f"{server}/dashboard")
    d.execute_script("sessionStorage.setItem('kemem.dashboard.key', arguments[0])", KEY)
    d.refresh()
    d.find_element(By.ID, "tab-memories").click()
    agent = d.find_element(By.ID, "mem-agent")
    agent.clear()
    agent.send_keys(AGENT)
    user = d.find_element(By.ID, "mem-user")
    user.clear()
    user.send_keys(USER)
    Select(d.find_element(By.ID, "mem-kind")).select_by_visible_text("events")
    limit = d.find_element(By.ID, "mem-limit")
    limit.clear()
    limit.send_keys("2")

    def rows(drv: Any) -> list[tuple[str, str]]:
        """(id, kind) of the rows shown, read in one go (the table is rebuilt meanwhile)."""
        script = (
            "return [...document.querySelectorAll('#mem-table tbody tr[data-id]')]"
            ".map((r) => [r.dataset.id, r.cells[0].textContent])"
        )
        return [tuple(row) for row in drv.execute_script(script)]

    d.find_element(By.ID, "mem-list").click()
    _wait(d, lambda drv: len(rows(drv)) == 2, "no first page")
    d.find_element(By.ID, "mem-more").click()  # the same listing: the next page, appended
    _wait(d, lambda drv: len(rows(drv)) == 4, "no second page")
    listed = rows(d)
    assert len({i for i, _ in listed}) == 4 and {k for _, k in listed} == {"events"}, listed

    Select(d.find_element(By.ID, "mem-kind")).select_by_visible_text("entities")
    d.find_element(By.ID, "mem-more").click()
    _wait(
        d,
        lambda drv: len(rows(drv)) == 2 and {k for _, k in rows(drv)} == {"entities"},
        "Load more after the form changed did not list entities afresh",
    )
    assert not d.find_element(By.ID, "error").is_displayed()
