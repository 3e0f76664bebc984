"""The query options are typed: the TypedDicts mirror QueryParams exactly, a type checker sees
them on the public verbs (a misspelt option is an error before it runs), and at run time an
unknown name is refused naming it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from kemem_es.contract.options import QueryOptions, SearchOptions
from kemem_es.contract.params import QueryParams

ROOT = Path(__file__).resolve().parents[2]


def test_the_options_mirror_query_params() -> None:
    fields = set(QueryParams.model_fields) - {"agent_id", "user_id"}
    assert set(QueryOptions.__annotations__) | set(SearchOptions.__annotations__) == fields
    assert set(QueryOptions.__annotations__) - set(SearchOptions.__annotations__) == {
        "limit",
        "filters",
        "top_k",
    }


def test_an_unknown_option_is_refused_naming_it() -> None:
    from kemem_es import InvalidInput, Kemem

    with pytest.raises(InvalidInput, match="limt") as refused:
        Kemem().query("火锅", user_id="u", agent_id="a", limt=3)  # type: ignore[call-arg]
    assert refused.value.field == "limt"


def test_a_type_checker_sees_the_public_api(tmp_path: Path) -> None:
    api = pytest.importorskip("mypy.api")
    script = tmp_path / "user_script.py"
    script.write_text(
        textwrap.dedent(
            """
            from kemem_es import KememError, Memory

            m = Memory()
            answer = m.search("火锅", user_id="u", agent_id="a", limit=3, mode="bm25")
            reveal_type(answer)
            m.query("火锅", user_id="u", agent_id="a", limt=3)
            m.search("火锅", user_id="u", agent_id="a", top_k=3)
            m.query("火锅", user_id="u", agent_id="a", mode="fast")
            """
        )
    )
    out, _, _ = api.run(["--strict", "--no-incremental", "--cache-dir=/dev/null", str(script)])
    assert 'Revealed type is "kemem_es.contract.response.QueryResponse"' in out, out
    assert '"limt"' in out and '"top_k"' in out, out  # unexpected keyword arguments
    assert '"mode"' in out, out  # "fast" is not a Mode
    assert "missing library stubs or py.typed" not in out, out
