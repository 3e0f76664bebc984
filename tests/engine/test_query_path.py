"""Walking one query from ``Kemem.query`` to the engine: the call stack at the moment the
request is sent passes each layer once, in order (front door → search → engine), and the
query's own thread sends exactly one request (docs/architecture.md draws this path)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import kemem_es

PACKAGE = Path(kemem_es.__file__).resolve().parent


def layer(filename: str) -> str | None:
    """The layer a frame's file belongs to: a top-level module or package of kemem_es (the
    front door is kemem.py with its mixins in front/; errors.py's ``guarded`` wraps its
    verbs); None outside the package."""
    path = Path(filename).resolve()
    if PACKAGE not in path.parents:
        return None
    top = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
    return {"kemem": "front", "errors": "front"}.get(top, top)


def query_path(kemem: Any, text: str) -> tuple[list[list[str]], list[str]]:
    """The stacks (``file:function``, outermost first) of the requests the query's thread
    sends, and those of other threads' requests meanwhile (background writers)."""
    import traceback

    engine = kemem.engine
    send = engine._send
    mine: list[list[str]] = []
    others: list[str] = []
    caller = threading.get_ident()

    def traced(req: Any) -> Any:
        if threading.get_ident() != caller:
            others.append(f"{req.method} {req.path}")
            return send(req)
        stack = traceback.extract_stack()[:-1]
        mine.append(
            [f"{Path(f.filename).resolve().relative_to(PACKAGE)}:{f.name}"
             for f in stack if layer(f.filename)]
        )  # fmt: skip
        return send(req)

    engine._send = traced
    try:
        kemem.query(text, agent_id="a", user_id="u", score_threshold=0)
    finally:
        engine._send = send
    return mine, others


def layers(stack: list[str]) -> list[str]:
    """The stack's layers, consecutive frames of one layer as one."""
    out: list[str] = []
    for frame in stack:
        name = layer(str(PACKAGE / frame.split(":", 1)[0]))
        assert name is not None
        if not out or out[-1] != name:
            out.append(name)
    return out


@pytest.mark.engine
def test_one_query_passes_each_layer_once(kemem) -> None:
    kemem.init()
    kemem.add("木木周末和祁煜去吃了火锅，点了双份毛肚", agent_id="a", user_id="u", refresh=True)
    kemem.query("火锅", agent_id="a", user_id="u")  # warm: model, names, scope counts
    stacks, _ = query_path(kemem, "火锅")
    assert len(stacks) == 1, stacks  # one request: the msearch of events and entities
    stack = stacks[0]
    assert layers(stack) == ["front", "search", "engine"], stack
    assert stack[0].startswith(("errors.py:", "front/recall.py:query")), stack
    assert any(f == "front/recall.py:query" for f in stack), stack
    assert any(f == "search/searcher.py:query" for f in stack), stack
    assert stack[-2:] == ["engine/client.py:msearch", "engine/client.py:request"], stack
