"""The package as a user meets it: cheap to import, a --version, python -m, py.typed, the
public names (errors, the original design's ``Memory``), a search answer that formats as the
prompt text, and ``top_k`` on search refused with the right name."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

import kemem_es

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("opensearchpy", "elasticsearch", "pydantic_settings", "jieba", "numpy", "onnxruntime")


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, check=True
    )


def _loaded(stderr: str) -> set[str]:
    """Top-level module names from ``python -X importtime`` output."""
    return {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:")
    }


def test_import_and_help_load_nothing_heavy() -> None:
    imported = _loaded(_python("-X", "importtime", "-c", "import kemem_es").stderr)
    assert not imported & set(HEAVY), imported & set(HEAVY)
    helped = _python("-X", "importtime", "-m", "kemem_es", "--help")
    assert "Usage" in helped.stdout and "--version" in helped.stdout
    assert "--install-completion" in helped.stdout
    loaded = _loaded(helped.stderr)
    assert not loaded & set(HEAVY), loaded & set(HEAVY)


def test_version_and_python_m() -> None:
    assert _python("-m", "kemem_es", "--version").stdout.strip() == (
        f"kemem-es {kemem_es.__version__}"
    )


def test_public_names() -> None:
    from kemem_es import Kemem, KememError, Memory, NotFound

    assert Memory is Kemem and issubclass(NotFound, KememError)
    for name in kemem_es.__all__:
        assert getattr(kemem_es, name) is not None, name
    assert (ROOT / "kemem_es" / "py.typed").exists()
    with pytest.raises(AttributeError):
        _ = kemem_es.NoSuchThing  # type: ignore[attr-defined]


def test_a_search_answer_formats_as_the_prompt_text() -> None:
    from kemem_es.contract.response import AdditionalInfo, EventHit, QueryResponse
    from kemem_es.prompt import render_prompt

    info = AdditionalInfo(timings_ms={}, query="火锅", tokens=[], base_words=[], expanded_words=[])
    hit = EventHit(
        id=1,
        score=0.9,
        index="e1",
        description="木木周末和祁煜去吃了火锅",
        updatetime="2025-01-04 19:00:00",
        created_at="2025-01-04 19:00:00",
    )
    resp = QueryResponse(memory_events=[hit], additional_info=info)
    text = f"关于用户的记忆: \n{resp}"
    assert "木木周末和祁煜去吃了火锅" in text and "QueryResponse" not in text
    now = datetime.now().astimezone()
    assert str(resp) == render_prompt(resp.memory_events, resp.memory_entities, now, None, None)
    assert repr(resp).startswith("QueryResponse(")


def test_top_k_on_search_is_refused_naming_limit() -> None:
    from kemem_es import InvalidInput, Kemem

    with pytest.raises(InvalidInput, match="limit") as refused:
        Kemem().search("火锅", user_id="u", agent_id="a", top_k=3)
    assert refused.value.field == "top_k"


def test_elasticsearch_without_its_extra_says_what_to_install(monkeypatch) -> None:
    from kemem_es.config import Settings
    from kemem_es.engine.connect import _elasticsearch_client
    from kemem_es.errors import EngineUnavailable

    monkeypatch.setitem(sys.modules, "elasticsearch", None)  # as if not installed
    with pytest.raises(EngineUnavailable, match=r"kemem-es\[elasticsearch\]"):
        _elasticsearch_client(Settings())


def test_lexicon_builds_without_scikit_learn_say_what_to_install(monkeypatch) -> None:
    from kemem_es.text.keywords import IdfTable

    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.feature_extraction.text", None)
    with pytest.raises(ValueError, match=r"kemem-es\[build\]"):
        IdfTable.from_texts(["木木喜欢火锅"])
