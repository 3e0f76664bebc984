"""Conversation memory without an engine: the window rule, the no-LLM fallback on the scripted
dialogue, and the context assembly's budget and no-overlap rules (docs/sessions.md). The
dialogue texts live in bench/session_fallback/, not here."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from kemem_es.contract.response import AdditionalInfo, EntityHit, EventHit, QueryResponse
from kemem_es.errors import InvalidInput
from kemem_es.memory.extract.prompt import render_dialogue
from kemem_es.memory.inputs import join_messages
from kemem_es.session.assemble import Inputs, assemble
from kemem_es.session.fallback import fallback_extraction, kept_sentences
from kemem_es.session.tokens import CharCounter, FileCounter, splits_lines, token_counter
from kemem_es.session.turns import normalise
from kemem_es.session.window import SessionState, cuts, dialogue_from

DATA = Path(__file__).resolve().parents[2] / "bench" / "session_fallback"
MODEL = Path(__file__).resolve().parents[3] / "shared/models/m3e-small-onnx"
NOW = datetime(2025, 6, 1, 20, 0).astimezone()


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines()]


# -- the window ------------------------------------------------------------------------------
def test_sixty_turns_in_batches_of_ten_are_five_batches() -> None:
    state, batches = SessionState(), []
    for _ in range(60):  # one turn per call, as a chat app adds them
        state = replace(state, next_seq=state.next_seq + 1)
        state, new = cuts(state, trigger=20, batch=10, flush=None)
        batches += new
    assert [(c.first_seq, c.last_seq) for c in batches] == [(i, i + 9) for i in range(0, 50, 10)]
    assert state.window_turns == 10  # the window keeps 10..19 turns between batches
    # a scene change hands over everything at once
    state, flushed = cuts(state, trigger=20, batch=10, flush="scene")
    assert [(c.first_seq, c.last_seq, c.reason) for c in flushed] == [(50, 59, "scene")]
    assert state.window_turns == 0


def test_dialogue_shows_turns_until_their_batch_is_done() -> None:
    state = SessionState(next_seq=25, window_from=15, open_batches=(0, 10), summary_upto=-1)
    assert dialogue_from(state, undone=[10]) == 10  # batch 0 done, batch 10 not yet
    assert dialogue_from(state, undone=[]) == 15
    assert dialogue_from(replace(state, summary_upto=17), undone=[10]) == 18


def test_messages_are_normalised_and_checked() -> None:
    turns = normalise([{"role": "system", "content": "x"}, {"role": "user", "content": "a"}])
    assert turns == [{"role": "user", "content": "a"}]
    with pytest.raises(InvalidInput) as err:
        normalise([{"role": "user", "content": "a", "seq": 1}, {"role": "user", "content": "b"}])
    assert err.value.field == "seq"
    with pytest.raises(InvalidInput):
        normalise([{"role": "robot", "content": "a"}])


# -- the no-LLM fallback -----------------------------------------------------------------------
def test_fallback_on_the_scripted_dialogue_stores_no_noise() -> None:
    dialogue = rows("dialogue_30.jsonl")
    assert len(dialogue) == 30
    found = fallback_extraction(dialogue, user_name="木木", now=NOW)
    kept = [e["description"] for e in found.events]
    assert kept and all(k.startswith("木木说：") for k in kept)  # every memory names its speaker
    said = {r["content"]: r for r in dialogue}
    for text in kept:
        original = text.removeprefix("木木说：")
        row = said[original]  # one user turn, whole: nothing from the assistant
        assert row["role"] == "user" and row["informative"], original
    # questions and small talk are never stored
    noise = [r["content"] for r in dialogue if r["role"] == "user" and not r["informative"]]
    assert noise and not {k.removeprefix("木木说：") for k in kept} & set(noise)


def test_fallback_precision_on_the_dev_set() -> None:
    dev = rows("dev.jsonl")
    kept = [bool(kept_sentences(r["content"])) for r in dev]
    false_kept = sum(k and not r["informative"] for k, r in zip(kept, dev, strict=True))
    missed = sum(not k and r["informative"] for k, r in zip(kept, dev, strict=True))
    assert false_kept == 0 and missed <= 2


def test_add_messages_label_each_turn_with_its_speaker() -> None:
    msgs = [{"role": "user", "content": "甲"}, {"role": "assistant", "content": "乙"}]
    assert join_messages(msgs) == "用户：甲\nAI：乙"
    names = {"user_name": "木木", "agent_name": "祁煜"}
    assert join_messages(msgs, names) == "木木：甲\n祁煜：乙"


def test_an_added_dialogue_leaves_out_its_system_turn_as_extraction_does() -> None:
    """A persona prompt is not what the user said: neither the event text of an added
    dialogue nor the extraction prompt's dialogue holds it (one function makes both)."""
    msgs = [
        {"role": "system", "content": "你是祁煜，一位画家"},
        {"role": "user", "content": "甲", "name": " 木木 "},
        {"role": "assistant", "content": "\u200b"},  # no visible text
    ]
    assert join_messages(msgs) == "木木：甲"
    assert render_dialogue(msgs) == "木木：甲"


# -- assembly: budget and no overlap -------------------------------------------------------------
def _hit(i: int, text: str, db: str = "user") -> EventHit:
    when = (NOW - timedelta(days=i + 1)).strftime("%Y-%m-%d %H:%M:%S")
    return EventHit(
        id=i, score=0.9, index=f"e{i}", db=db, description=text, updatetime=when, created_at=when
    )


def _inputs(budget: int, texts: list[str]) -> Inputs:
    """A window of the dialogue's turns, an overview of two of its user lines, and a recall
    that returns overview events, a dialogue line and new memories."""
    dialogue = rows("dialogue_30.jsonl")
    turns = [{"seq": i, "role": r["role"], "content": r["content"]} for i, r in enumerate(dialogue)]
    overview = [
        {"id": "o1", "description": texts[0], "created_at": "2025-05-01T10:00:00+08:00"},
        {"id": "o2", "description": texts[1], "created_at": "2025-05-03T10:00:00+08:00"},
    ]
    entity = EntityHit(
        id=0,
        kind="用户属性",
        score=0.8,
        index={"index": "n1"},
        entity_name="木木",
        entity_type="客体",
        description=texts[2],
        updatetime="2025-05-01 00:00:00",
    )
    recall = QueryResponse(
        memory_events=[
            _hit(1, texts[0]),
            _hit(2, dialogue[4]["content"]),
            _hit(3, texts[3]),
            _hit(4, texts[4]),
        ],
        memory_entities=[entity],
        additional_info=AdditionalInfo(
            timings_ms={}, query="", tokens=[], base_words=[], expanded_words=[]
        ),
    )
    for hit in recall.memory_events[:1]:
        hit.index = "o1"  # the overview's own event, recalled again
    return Inputs(
        message=dialogue[-2]["content"],
        turns=turns[:-2],
        summary="",
        overview=overview,
        recall=recall,
        user_name="木木",
        agent_name="祁煜",
        now=NOW,
        budget=budget,
        shares=(0.5, 0.2, 0.3),
        can_summarize=False,
    )


MEMS = [r["content"] for r in rows("dev.jsonl") if r["informative"]][:5]


@pytest.mark.parametrize("budget", [40, 80, 160, 320, 640, 5000])
def test_context_fits_the_budget_and_keeps_the_last_turn(budget: int) -> None:
    counter = token_counter(None, MODEL) if (MODEL / "tokenizer.json").is_file() else CharCounter()
    inp = _inputs(budget, MEMS)
    ctx = assemble(inp, counter)
    assert ctx.tokens.total == counter.count(ctx.text) <= budget
    assert ctx.text.splitlines()[-1] == f"木木：{inp.message}"  # the last turn, verbatim
    assert ctx.dialogue[-1].content == inp.message
    # no memory in two parts
    overview = {o.description for o in ctx.overview}
    details = [e.description for e in ctx.events] + [n.description for n in ctx.entities]
    turns = {t.content for t in ctx.dialogue}
    assert not overview & set(details) and not turns & set(details)
    assert len(details) == len(set(details))
    # each memory is whole or absent
    for text in overview | set(details):
        assert text in ctx.text


MINILM = MODEL.parent / "all-minilm-l6-v2-onnx"


@pytest.mark.parametrize("model", [MODEL, MINILM], ids=["m3e", "minilm"])
def test_the_parts_counted_in_one_tokenisation_are_their_own_counts(model: Path) -> None:
    if not (model / "tokenizer.json").is_file():
        pytest.skip(f"no tokenizer at {model}")
    counter = token_counter(None, model)
    lines = [r["content"] for r in rows("dialogue_30.jsonl")]
    parts = [
        "\n".join(["前情提要：", *MEMS[:3]]),
        "\n".join([*MEMS[3:], "Mumu went hiking on 2025-05-30, 3km."]),
        "",
        "\n".join(["当前对话：", *(f"木木：{x}" for x in lines[:9])]),
    ]
    text, total, counts = counter.count_parts(parts)
    assert text == "\n".join(p for p in parts if p)
    assert total == counter.count(text)
    assert counts == [counter.count(p) for p in parts]  # as if each were tokenised alone
    for budget in (80, 640, 5000):
        ctx = assemble(_inputs(budget, MEMS), counter)
        t = ctx.tokens
        assert t.total == counter.count(ctx.text) <= budget
        assert t.overview + t.details + t.summary + t.dialogue == t.total
    assert CharCounter().count_parts(["ab", "", "c"]) == ("ab\nc", 4, [2, 0, 1])


@pytest.mark.parametrize("model", [MODEL, MINILM], ids=["m3e", "minilm"])
def test_counting_by_lines_is_the_whole_texts_one_tokenisation(model: Path) -> None:
    """The BERT-style vocabularies count a context from its lines' remembered counts: exactly
    what one tokenisation of the whole text gives, on text that mixes scripts, spaces, marks."""
    if not (model / "tokenizer.json").is_file():
        pytest.skip(f"no tokenizer at {model}")
    counter = FileCounter(model / "tokenizer.json")
    assert counter.by_lines
    rng = random.Random(7)
    pieces = [*MEMS, "Mumu went hiking, 3km!", "e\u0301té", "[SEP]", "😀👍", "  ", "2025-05-30"]
    pieces.append("\r")
    pieces += [r["content"] for r in rows("dialogue_30.jsonl")]
    for _ in range(200):
        parts = [
            "\n".join(rng.choice(pieces) + rng.choice(["", " ", "。", "\t"]) for _ in range(k))
            for k in (rng.randint(0, 6) for _ in range(4))
        ]
        text, total, counts = counter.count_parts(parts)
        whole = counter._tok.encode(text, add_special_tokens=False)
        assert total == len(whole.ids) == sum(counts)
        assert counts == [len(counter._tok.encode(p, add_special_tokens=False).ids) for p in parts]


def test_a_byte_level_vocabulary_is_counted_whole(tmp_path: Path) -> None:
    """A byte-level BPE (Qwen, GPT) may merge a line break into a token: its contexts are
    tokenised whole, never summed from lines."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(["好的\n\n好的\n我们\n"] * 50, trainers.BpeTrainer(vocab_size=300))
    tok.save(str(tmp_path / "tokenizer.json"))
    counter = FileCounter(tmp_path / "tokenizer.json")
    assert not counter.by_lines
    text, total, _ = counter.count_parts(["好的\n", "好的", "我们"])
    assert total == counter.count(text) == len(tok.encode(text).ids)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"pre_tokenizer": {"type": "BertPreTokenizer"}, "normalizer": None}, True),
        (
            {
                "pre_tokenizer": {
                    "type": "Sequence",
                    "pretokenizers": [{"type": "Digits"}, {"type": "WhitespaceSplit"}],
                },
                "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}]},
            },
            True,
        ),
        ({"pre_tokenizer": {"type": "Digits"}, "normalizer": None}, False),  # keeps spaces
        ({"pre_tokenizer": {"type": "Metaspace"}, "normalizer": None}, False),
        (
            {"pre_tokenizer": {"type": "Whitespace"}, "normalizer": {"type": "Replace"}},
            False,
        ),
        (
            {
                "pre_tokenizer": {"type": "Whitespace"},
                "normalizer": None,
                "added_tokens": [{"content": "<|im_start|>\n"}],
            },
            False,
        ),
        ({"pre_tokenizer": None, "normalizer": None}, False),
    ],
)
def test_which_vocabularies_never_join_two_lines(config: dict, expected: bool) -> None:
    assert splits_lines(config) is expected


def test_a_budget_below_the_last_turn_is_refused() -> None:
    with pytest.raises(InvalidInput) as err:
        assemble(_inputs(5, MEMS), CharCounter())
    assert err.value.field == "max_tokens"


def test_without_an_llm_older_turns_are_dropped_and_the_answer_says_so() -> None:
    ctx = assemble(_inputs(120, MEMS), CharCounter())
    assert any("dropped, not summarised" in n for n in ctx.notes)
    assert len(ctx.dialogue) < 29
