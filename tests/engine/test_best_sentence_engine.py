"""A memory's best sentence through the API (search.best_sentence): each sentence of a
multi-sentence event is embedded on its own when written, and a chat turn about one of them
lifts the memory by what ``explain`` shows; one sentence, a supplied vector or the setting off
store no sentence codes."""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pytest
from support import drop_prefix, stored_events

from kemem_es.contract.params import QueryParams
from kemem_es.store import vector_code
from kemem_es.store.layout import SENTENCE_CODES_FIELD

A = {"agent_id": "mobai", "user_id": "u_azhe"}
FIRST = "阿哲冬天新推出腊味煲仔饭，头一周锅底总是烧焦发苦，他把炉火调小反复试了十几煲才稳定下来"
SECOND = "墨白建议他把每一煲的时间和火力都记在本子上"
TWO = f"{FIRST}；{SECOND}。"


def _codes(kemem: Any, memory_id: str) -> str | None:
    body = {"query": {"term": {"id": memory_id}}, "_source": [SENTENCE_CODES_FIELD]}
    index = f"{kemem.settings.index_prefix}-user-events"
    hits = kemem.engine.client.search(index=index, body=body)["hits"]["hits"]
    assert len(hits) == 1
    return hits[0]["_source"].get(SENTENCE_CODES_FIELD)


def _store(kemem: Any) -> None:
    vec = kemem.embedder.embed([TWO])[0].astype(float).round(6).tolist()
    stored_events(
        kemem,
        [{**A, "id": "two", "description": TWO, "created_at": "2025-01-06 20:00:00"},
         {**A, "id": "one", "description": "阿哲周末带女儿去海边捡贝壳。",
          "created_at": "2025-01-08 20:00:00"},
         {**A, "id": "given", "description": TWO, "vector": vec,
          "created_at": "2025-01-09 20:00:00"}],
    )  # fmt: skip


@pytest.mark.engine
def test_each_sentence_of_an_event_is_embedded_on_its_own(kemem: Any) -> None:
    _store(kemem)
    code = _codes(kemem, "two")
    assert code is not None
    stored = vector_code.decode_many(code, kemem.embedder.dim)
    alone = kemem.embedder.embed([FIRST, SECOND])
    assert stored.shape == (2, kemem.embedder.dim)
    # the int8 code of each sentence's own vector, in order
    assert np.all(np.sum(stored * alone, axis=1) > 0.995)
    assert _codes(kemem, "one") is None  # one sentence: the memory's own vector says it
    assert _codes(kemem, "given") is None  # the caller's vector, the caller's model


@pytest.mark.engine
def test_a_turn_about_one_sentence_lifts_its_memory_by_what_explain_shows(kemem: Any) -> None:
    _store(kemem)
    # anchor feedback off: it would raise the twin memory ("given") up to the best hit
    opts = {**A, "score_threshold": 0.0, "expand": False, "explain": True, "anchor_weight": 0.0,
            "contiguity_weight": 0.0}  # fmt: skip
    turn = "墨白你说得对，我现在每一煲的火力和时间都记在本子上了"
    lifted = {h.index: h for h in kemem.query(turn, **opts).memory_events}
    plain = {
        h.index: h for h in kemem.query(turn, **opts, memory_sentence_weight=0.0).memory_events
    }
    mine = next(k for k, h in lifted.items() if h.description == TWO and k.endswith("two"))
    gain = lifted[mine].signals.sentence
    assert gain > 0.005 and plain[mine].signals.sentence == 0.0
    assert lifted[mine].score == pytest.approx(plain[mine].score + gain, abs=2e-3)
    # the same text with a supplied vector has no sentence codes: not lifted
    given = next(k for k in lifted if k.endswith("given"))
    assert lifted[given].signals.sentence == 0.0
    assert lifted[mine].score > lifted[given].score
    # the signals still add up to the score
    s = lifted[mine].signals
    w = QueryParams(**A).weights
    total = w.kw * s.kw + w.vec * s.vec + w.time * s.time + w.strength * s.strength
    assert min(1.0, total + s.sentence + s.anchor) == pytest.approx(lifted[mine].score, abs=0.01)


@pytest.mark.engine
def test_an_update_keeps_the_codes_unless_its_text_changes(kemem: Any) -> None:
    _store(kemem)
    before = _codes(kemem, "two")
    kemem.update("two", {"metadata": {"k": 1}}, **A, refresh=True)  # the text stays
    assert _codes(kemem, "two") == before
    kemem.update("two", "阿哲的煲仔饭终于不再烧焦了。", **A, refresh=True)
    assert _codes(kemem, "two") is None
    kemem.update("two", TWO, **A, refresh=True)
    assert _codes(kemem, "two") is not None


@pytest.mark.engine
def test_the_setting_off_stores_no_sentence_codes(engine_settings: Any, embedder: Any) -> None:
    from kemem_es import Kemem

    settings = engine_settings.model_copy(
        update={"index_prefix": f"test-{uuid.uuid4().hex[:8]}", "sentence_vectors": False}
    )
    km = Kemem(settings)
    km.embedder = embedder
    try:
        _store(km)
        assert _codes(km, "two") is None
    finally:
        drop_prefix(km)


@pytest.mark.engine
def test_migrate_gives_memories_written_before_sentence_codes_theirs(kemem: Any) -> None:
    """`kemem-es migrate` fills in the sentence codes a memory written before them lacks —
    the codes its write would give it now, no history entry — and leaves without them a memory
    whose vector this model does not give its text (the caller's model)."""
    from support import cli_env, run_cli

    from kemem_es.store.sentence_fill import fill_sentence_codes

    _store(kemem)
    other = kemem.embedder.embed(["阿哲周末带女儿去海边捡贝壳。"])[0].astype(float).round(6)
    stored_events(
        kemem,
        [{**A, "id": "foreign", "description": TWO, "vector": other.tolist(),
          "created_at": "2025-01-10 20:00:00"}],
        init=False,
    )  # fmt: skip
    written = _codes(kemem, "two")
    assert written is not None and _codes(kemem, "foreign") is None
    alias = f"{kemem.settings.index_prefix}-user-events"
    history = f"{kemem.settings.index_prefix}-history"
    kemem.engine.refresh(history)
    entries = kemem.engine.count(history)
    # as the release before sentence codes wrote it (and as `given` is: its vector is exactly
    # this model's of its text, so it is filled too)
    (hit,) = kemem.engine.search(alias, {"query": {"term": {"id": "two"}}})["hits"]["hits"]
    ref = {"_index": hit["_index"], "_id": hit["_id"], "routing": hit["_routing"]}
    kemem.engine.bulk([{"update": ref}, {"doc": {SENTENCE_CODES_FIELD: None}}], refresh=True)
    assert _codes(kemem, "two") is None

    proc = run_cli("migrate", env=cli_env(kemem))
    assert proc.returncode == 0, proc.stderr
    assert (
        f"{alias}: 2 memory(ies) given their sentences' codes; "
        "1 kept without (their vector is not this model's)"
    ) in proc.stdout
    assert _codes(kemem, "two") == written  # what its write gives it
    assert _codes(kemem, "given") == written
    assert _codes(kemem, "foreign") is None and _codes(kemem, "one") is None
    kemem.engine.refresh(history)
    assert kemem.engine.count(history) == entries  # what the memory says did not change
    (again,) = fill_sentence_codes(kemem.engine, kemem.embedder)  # re-running: nothing to fill
    assert (again.filled, again.not_ours) == (0, 1)


@pytest.mark.engine
def test_a_memory_edited_while_its_codes_are_filled_keeps_the_edit(kemem: Any) -> None:
    """The fill writes a memory only if it is still the version it read (``if_seq_no``): one
    updated in between keeps what its update wrote, one deleted stays deleted; both are
    counted as changed meanwhile."""
    from kemem_es.store.documents import MEMORY_SENTENCES
    from kemem_es.store.sentence_fill import fill_sentence_codes
    from kemem_es.text.dialogue import memory_sentences

    _store(kemem)
    stored_events(kemem, [{**A, "id": "gone", "description": TWO,
                           "created_at": "2025-01-11 20:00:00"}], init=False)  # fmt: skip
    alias = f"{kemem.settings.index_prefix}-user-events"
    for memory_id in ("two", "given", "gone"):  # as the release before sentence codes wrote them
        (hit,) = kemem.engine.search(alias, {"query": {"term": {"id": memory_id}}})["hits"]["hits"]
        ref = {"_index": hit["_index"], "_id": hit["_id"], "routing": hit["_routing"]}
        kemem.engine.bulk([{"update": ref}, {"doc": {SENTENCE_CODES_FIELD: None}}], refresh=True)
    edited = "阿哲的煲仔饭终于不再烧焦了。墨白说那个本子功不可没。"

    class EditsFirst:
        """The model, but the first call (the page's whole texts) lets an edit in first."""

        def __init__(self, inner: Any) -> None:
            self.inner, self.dim, self.name, self.calls = inner, inner.dim, inner.name, 0

        def embed(self, texts: Any) -> Any:
            self.calls += 1
            if self.calls == 1:
                kemem.update("two", edited, **A, refresh=True)
                kemem.delete("gone", **A, refresh=True)
            return self.inner.embed(texts)

        def embed_one(self, text: str) -> Any:
            return self.inner.embed_one(text)

    (rep,) = fill_sentence_codes(kemem.engine, EditsFirst(kemem.embedder))
    assert (rep.filled, rep.changed) == (1, 2)  # "given" filled; "two" edited, "gone" deleted
    assert kemem.get("two", **A).text == edited
    code = _codes(kemem, "two")  # what the update wrote: the edited text's two sentences
    assert code is not None
    stored = vector_code.decode_many(code, kemem.embedder.dim)
    alone = kemem.embedder.embed(memory_sentences(edited, MEMORY_SENTENCES))
    assert stored.shape == alone.shape and np.all(np.sum(stored * alone, axis=1) > 0.995)
