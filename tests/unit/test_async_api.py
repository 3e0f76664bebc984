"""AsyncKemem's surface, without an engine: every verb of Kemem is there, awaitable where it
touches the engine or the model, with Kemem's own signature."""

from __future__ import annotations

import inspect

from kemem_es import AsyncKemem, Kemem

# Kemem's parts, built on first use; AsyncKemem reaches them through ``core``. close → aclose.
PARTS = {
    "engine", "embedder", "tokenizer", "expander", "searcher", "reinforcer", "writer",
    "extractor", "writes", "memories", "close", "names", "calibration", "sessions",
    "token_counter",
}  # fmt: skip
NOT_AWAITED = {"prompt", "extraction_errors", "extraction_failures"}  # kept in memory


def public(cls: type) -> set[str]:
    return {name for name in vars(cls) if not name.startswith("_")}


def test_every_verb_of_kemem_is_on_async_kemem() -> None:
    missing = public(Kemem) - PARTS - public(AsyncKemem)
    assert not missing, f"Kemem verbs AsyncKemem lacks: {sorted(missing)}"
    assert not PARTS & public(AsyncKemem)  # a part is reached through .core, not copied


def test_verbs_are_awaitable_with_kemem_signatures() -> None:
    verbs = public(Kemem) - PARTS - NOT_AWAITED
    for name in verbs:
        mine, theirs = getattr(AsyncKemem, name), getattr(Kemem, name)
        assert inspect.iscoroutinefunction(mine), name
        assert inspect.signature(mine) == inspect.signature(theirs), name
    assert not inspect.iscoroutinefunction(AsyncKemem.prompt)
    assert isinstance(AsyncKemem.extraction_errors, property)
