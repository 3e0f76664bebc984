"""Conversation memory on a real engine, with a loopback chat-completions stub as the LLM
(docs/sessions.md): batches of N turns → one extraction call each, speaker-labelled; the
overview timeline; scene changes; the token budget; a message sent twice; deletion; the no-LLM
fallback. Dialogue texts come from bench/session_fallback/, never from this file."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from llm_stub import serve_stub

from kemem_es import Kemem

DATA = Path(__file__).resolve().parents[2] / "bench" / "session_fallback"
A = {"user_id": "u_mumu", "agent_id": "qiyu", "user_name": "木木", "agent_name": "祁煜"}
SCOPE = {"user_id": "u_mumu", "agent_id": "qiyu"}


def rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines()]


def sixty_turns() -> list[dict[str, str]]:
    """60 distinct turns: the scripted dialogue, then the dev set's lines alternating roles."""
    turns = [{"role": r["role"], "content": r["content"]} for r in rows("dialogue_30.jsonl")]
    for i, r in enumerate(rows("dev.jsonl")[:30]):
        turns.append({"role": "user" if i % 2 == 0 else "assistant", "content": r["content"]})
    return turns


def batch_answer(body: dict[str, Any]) -> dict[str, Any]:
    """One event per batch, named after the batch's first user line (distinct per batch)."""
    dialogue = body["messages"][1]["content"].split("\n\n", 1)[1].splitlines()
    first = next(line for line in dialogue if line.startswith("木木："))
    return {
        "events": [{"description": f"{first}（{len(dialogue)}句）", "time": None}],
        "entities": [],
    }


def with_llm(km: Kemem, url: str, **settings: Any) -> Kemem:
    new = Kemem(
        km.settings.model_copy(
            update={"llm_base_url": url, "llm_model": "stub", "dedup_threshold": 0.99, **settings}
        )
    )
    new.embedder = km.embedder
    return new


@pytest.mark.engine
def test_sixty_turns_are_five_speaker_labelled_extractions(kemem: Kemem) -> None:
    kemem.init()
    with serve_stub({"events": [], "entities": []}) as stub:
        stub.responder = batch_answer
        km = with_llm(kemem, stub.url, session_overview_max=3)
        turns = sixty_turns()
        for i in range(0, 60, 2):
            assert km.add(turns[i : i + 2], session_id="s1", **A) == []
        km.drain()
        assert len(stub.requests) == 5  # not 60: one call per batch of 10 turns
        for req in stub.requests:
            system, user = (m["content"] for m in req["body"]["messages"])
            assert "祁煜" in system and "木木" in system  # the agent's and the user's names
            lines = user.split("\n\n", 1)[1].splitlines()
            assert len(lines) == 10 and all(re.match(r"^(木木|祁煜)：", ln) for ln in lines)
        # the overview: the newest events, in time order, capped at 3
        km.engine.refresh(f"{km.settings.index_prefix}-*")
        ctx = km.context(turns[-1]["content"], session_id="s1", max_tokens=4000, **A)
        want = [batch_answer(r["body"])["events"][0]["description"] for r in stub.requests][-3:]
        assert [o.description for o in ctx.overview] == want
        # the dialogue: the 10 turns not yet handed over, then the current message
        assert [t.seq for t in ctx.dialogue[:-1]] == list(range(50, 60))
        km.close()


@pytest.mark.engine
def test_a_scene_change_flushes_the_window(kemem: Kemem) -> None:
    kemem.init()
    with serve_stub({"events": [], "entities": []}) as stub:
        stub.responder = batch_answer
        km = with_llm(kemem, stub.url)
        turns = sixty_turns()[:6]
        km.add(turns[:4], session_id="s2", **A)
        km.drain()
        assert stub.requests == []  # 4 turns: below the trigger
        km.add(turns[4:6], session_id="s2", scene_change=True, **A)
        km.drain()
        assert len(stub.requests) == 1
        dialogue = stub.requests[0]["body"]["messages"][1]["content"].split("\n\n", 1)[1]
        assert len(dialogue.splitlines()) == 6  # everything at once
        ended = km.end_session("s2", **SCOPE)
        assert ended.batches == []  # nothing left to hand over
        km.close()


@pytest.mark.engine
def test_context_budget_last_turn_and_no_overlap(kemem: Kemem) -> None:
    kemem.init()
    with serve_stub({"events": [], "entities": []}) as stub:
        stub.responder = batch_answer
        km = with_llm(kemem, stub.url)
        turns = sixty_turns()
        for i in range(0, 40, 2):
            km.add(turns[i : i + 2], session_id="s3", **A)
        km.drain()
        km.engine.refresh(f"{km.settings.index_prefix}-*")
        message = turns[41]["content"] if turns[41]["role"] == "user" else turns[40]["content"]
        for budget in (60, 150, 400, 1500):
            ctx = km.context(message, session_id="s3", max_tokens=budget, score_threshold=0.0, **A)
            assert ctx.tokens.total == km.token_counter.count(ctx.text) <= budget
            assert ctx.text.splitlines()[-1] == f"木木：{message}"
            over = {o.id for o in ctx.overview}
            assert not over & {e.index for e in ctx.events if e.db == "user"}
            texts = [o.description for o in ctx.overview] + [e.description for e in ctx.events]
            texts += [n.description for n in ctx.entities]
            assert len(texts) == len(set(texts))
            turn_texts = {t.content for t in ctx.dialogue}
            assert not turn_texts & set(texts)
        km.close()


@pytest.mark.engine
def test_messages_are_stored_once_listed_and_deleted_with_the_user(kemem: Kemem) -> None:
    kemem.init()
    turns = sixty_turns()[:4]
    seqd = [{**t, "seq": i} for i, t in enumerate(turns)]
    kemem.add(seqd, session_id="s4", **A)
    again = kemem.sessions.add(kemem._scope("qiyu", "u_mumu", "user"), "s4", seqd[:2], {})[0]
    assert again.stored == 0 and again.seqs == [0, 1]  # the same numbers: stored once
    listed = kemem.session_messages("s4", **SCOPE)
    assert [(m.seq, m.content) for m in listed] == [(i, t["content"]) for i, t in enumerate(turns)]
    assert kemem.session_message("s4", 2, **SCOPE).content == turns[2]["content"]
    assert [s.session_id for s in kemem.list_sessions(**SCOPE)] == ["s4"]
    # another agent's scope does not see it
    assert kemem.list_sessions(user_id="u_mumu", agent_id="lishen") == []
    kemem.delete_all(**SCOPE, forget=True)
    assert kemem.session_messages("s4", **SCOPE) == []
    assert kemem.list_sessions(**SCOPE) == []
    (entry,) = kemem.history("session:s4", **SCOPE)  # one entry per session, without its text
    assert entry.event == "FORGET" and entry.kind == "sessions" and entry.old_text is None


@pytest.mark.engine
def test_without_an_llm_the_dialogue_leaves_only_labelled_user_facts(kemem: Kemem) -> None:
    kemem.init()
    dialogue = rows("dialogue_30.jsonl")
    for i in range(0, 30, 2):
        pair = [{"role": r["role"], "content": r["content"]} for r in dialogue[i : i + 2]]
        kemem.add(pair, session_id="s5", **A)
    kemem.end_session("s5", **SCOPE)
    kemem.drain()
    kemem.engine.refresh(f"{kemem.settings.index_prefix}-*")
    stored = [m.text for m in kemem.get_all(**SCOPE).results]
    assert stored and all(t.startswith("木木说：") for t in stored)
    noise = {r["content"] for r in dialogue if r["role"] == "assistant" or not r["informative"]}
    assert not {t.removeprefix("木木说：") for t in stored} & noise


@pytest.mark.engine
def test_older_turns_are_summarised_through_the_llm(kemem: Kemem) -> None:
    kemem.init()
    summary = rows("dev.jsonl")[0]["content"]  # what the stub "summarises" to

    def answer(body: dict[str, Any]) -> Any:
        return batch_answer(body) if "response_format" in body else summary

    with serve_stub({"events": [], "entities": []}) as stub:
        stub.responder = answer
        km = with_llm(kemem, stub.url, session_max_tokens=64)
        turns = sixty_turns()[:8]
        for i in range(0, 8, 2):
            km.add(turns[i : i + 2], session_id="s6", **A)
        km.drain()
        asked = [r for r in stub.requests if "response_format" not in r["body"]]
        assert asked  # the window outgrew its share: a summary was asked for
        said = asked[0]["body"]["messages"][1]["content"]
        assert "木木：" in said and "祁煜：" in said  # speaker-labelled, like extraction
        ctx = km.context(turns[-1]["content"], session_id="s6", max_tokens=400, **A)
        assert ctx.summary == summary and summary in ctx.text
        state = km.sessions.manager.view(km._scope("qiyu", "u_mumu", "user"), "s6").state
        assert all(t.seq > state.summary_upto for t in ctx.dialogue[:-1])  # not in two parts
        km.close()
