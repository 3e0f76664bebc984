"""The idle time that ends a session (KEMEM_SESSION_IDLE_S): the sweep (``resume_sessions``, a
server's periodic task, ``kemem-es sessions sweep``) hands an idle session's window to
extraction exactly once — not a session still active, not the same session id of another scope —
and two sweeps at once (two processes' worth) hand it over once (docs/sessions.md)."""

from __future__ import annotations

import json
import re
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from llm_stub import serve_stub
from support import cli_env, run_cli
from test_sessions_engine import A, batch_answer, sixty_turns, with_llm

from kemem_es import Kemem
from kemem_es.session.manager import Swept
from kemem_es.store.sessions import SessionStore, batch_key

NAMES = {"user_name": "木木", "agent_name": "祁煜"}


def _state(km: Kemem, agent: str, sid: str) -> dict[str, Any]:
    found = SessionStore(km.engine).state(km._scope(agent, "u_mumu", "user"), sid)
    assert found is not None
    return found.source


@pytest.mark.engine
def test_an_idle_session_is_flushed_once_an_active_one_and_another_scope_are_not(
    kemem: Kemem,
) -> None:
    kemem.init()
    turns = sixty_turns()
    now = datetime.now(timezone.utc)
    long_ago = now - timedelta(hours=2)  # past KEMEM_SESSION_IDLE_S (1800 s)
    with serve_stub({"events": [], "entities": []}) as stub:
        stub.responder = batch_answer
        km = with_llm(kemem, stub.url)
        km2 = with_llm(kemem, stub.url)  # another process's Kemem over the same store
        mine, theirs = km._scope("qiyu", "u_mumu", "user"), km._scope("lishen", "u_mumu", "user")
        manager = km.sessions.manager
        manager.append(mine, "s", turns[:6], NAMES, now=long_ago)  # idle for two hours
        manager.append(mine, "busy", turns[:4], NAMES, now=now - timedelta(minutes=10))
        manager.append(mine, "busy", turns[4:6], NAMES, now=now)  # active again just now
        manager.append(theirs, "s", turns[:4], NAMES, now=now)  # same id, another agent
        km.drain()
        assert stub.requests == []  # every window below the trigger

        # two sweeps at once: the idle window is handed over by one of them, once
        done: list[Swept] = []
        sweeps = [threading.Thread(target=lambda k=k: done.append(k.sessions.manager.sweep()))
                  for k in (km, km2)]  # fmt: skip
        for t in sweeps:
            t.start()
        for t in sweeps:
            t.join(120)
        km.drain()
        km2.drain()
        assert sorted((d.sessions, d.batches) for d in done) == [(0, 0), (1, 1)]
        assert len(stub.requests) == 1  # one extraction call, speaker-labelled, all 6 turns
        said = stub.requests[0]["body"]["messages"][1]["content"].split("\n\n", 1)[1]
        lines = said.splitlines()
        assert len(lines) == 6 and all(re.match(r"^(木木|祁煜)：", ln) for ln in lines)

        (batch,) = SessionStore(km.engine).get_docs(mine, [batch_key("s", 0)])
        assert batch is not None
        assert (batch.source["reason"], batch.source["status"]) == ("idle", "done")
        assert (batch.source["first_seq"], batch.source["last_seq"]) == (0, 5)
        state = _state(km, "qiyu", "s")
        assert state["window_from"] == 6 and state["window_open"] is False
        assert state["last_at"].startswith(long_ago.isoformat()[:19])  # a sweep is not a turn

        # again (the public verb, and the other process): nothing left to hand over
        assert km.resume_sessions() == 0 and km2.resume_sessions() == 0
        km.drain()
        km2.drain()
        assert len(stub.requests) == 1
        # the active session and the other scope's session of the same id are untouched
        busy, other = _state(km, "qiyu", "busy"), _state(km, "lishen", "s")
        assert (busy["window_from"], busy["open_batches"], busy["window_open"]) == (0, [], True)
        assert (other["window_from"], other["open_batches"]) == (0, [])
        km.engine.refresh(f"{km.settings.index_prefix}-*")
        assert km.count(**{k: A[k] for k in ("user_id", "agent_id")}) == 1
        assert km.count(user_id="u_mumu", agent_id="lishen") == 0

        # a later sweep, past the active session's idle time too, ends it (and only it)
        later = manager.sweep(now=now + timedelta(hours=1))
        assert (later.sessions, later.batches) == (2, 2)  # "busy", and the other scope's "s"
        km.drain()
        assert len(stub.requests) == 3
        km2.close()
        km.close()


@pytest.mark.engine
def test_the_sweep_creates_nothing_on_a_prefix_without_sessions(kemem: Kemem) -> None:
    kemem.init()
    assert kemem.resume_sessions() == 0
    assert not kemem.engine.index_exists(f"{kemem.settings.index_prefix}-sessions")


@pytest.mark.engine
def test_kemem_es_sessions_sweep(kemem: Kemem) -> None:
    kemem.init()
    scope = kemem._scope("qiyu", "u_mumu", "user")
    long_ago = datetime.now(timezone.utc) - timedelta(hours=2)
    kemem.sessions.manager.append(scope, "old", sixty_turns()[:4], NAMES, now=long_ago)
    out = run_cli("sessions", "sweep", env=cli_env(kemem))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"resumed": 0, "sessions": 1, "batches": 1}
    again = run_cli("sessions", "sweep", env=cli_env(kemem))
    assert json.loads(again.stdout) == {"resumed": 0, "sessions": 0, "batches": 0}
