"""The entity search's candidate filter (issue 42): ``match_clauses`` matches exactly what
``keyword_clauses`` matches, in a few clauses."""

from __future__ import annotations

from typing import Any

from kemem_es.search.clauses import EVENT_FIELDS, SearchWord, keyword_clauses, match_clauses
from kemem_es.search.entities import SHARED_FIELDS, TIERS


def atoms(clauses: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """(kind, field, value) of every word a list of should-clauses matches on."""
    out = set()
    for c in clauses:
        ((kind, spec),) = c.items()
        if kind == "terms":
            ((field, values),) = [(k, v) for k, v in spec.items() if k != "boost"]
            out |= {("term", field, v) for v in values}
            continue
        ((field, body),) = spec.items()
        if kind == "term":
            out.add(("term", field, body["value"]))
        else:
            out.add(("phrase", field, body["query"]))
    return out


WORDS = [
    SearchWord("吃火锅", tokens=("吃火锅",), weight=0.5, subwords=("火锅",)),
    SearchWord("狗", single_char=True, weight=0.2),
    SearchWord("周末 爬山", tokens=("周末", "爬山"), weight=0.3),
    SearchWord("麻辣烫", level=7, tokens=("麻辣烫",)),
    SearchWord("聚餐", level=3, tokens=("聚餐",)),
    SearchWord("火锅 店", level=5, tokens=("火锅", "店")),
    SearchWord("豆包", level=4, tokens=("豆包",), weight=0.4, context=True, subwords=("豆",)),
    SearchWord("空", tokens=()),
]


def test_match_clauses_match_what_keyword_clauses_match() -> None:
    fields_sets = [list(SHARED_FIELDS), list(EVENT_FIELDS)]
    fields_sets += [[f for f in t.fields if f not in SHARED_FIELDS] for t in TIERS]
    for fields in fields_sets:
        weighted = {f: 1.0 for f in fields}
        assert atoms(match_clauses(WORDS, fields)) == atoms(keyword_clauses(WORDS, weighted))


def test_match_clauses_are_one_terms_query_per_field() -> None:
    clauses = match_clauses(WORDS, list(SHARED_FIELDS))
    terms = [c for c in clauses if "terms" in c]
    assert len(terms) == len(SHARED_FIELDS)
    assert all("boost" not in c["terms"] for c in terms)
