"""A session's window vector is computed once per turn: the context takes over a job still
queued, waits for one that runs, and gives up waiting after PREPARE_WAIT_S."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from kemem_es.config import SessionSettings
from kemem_es.session import service
from kemem_es.session.service import Sessions
from kemem_es.store.scope import Scope

SCOPE = Scope.of(agent_id="a1", user_id="u1")
TURNS = [{"role": "user", "content": "我昨天去爬山了"}, {"role": "assistant", "content": "累吗"}]


class Manager:
    store = None

    def view(self, scope: Scope, sid: str, fresh: bool = True) -> Any:
        return SimpleNamespace(turns=TURNS)


class Prepare:
    """Counts its runs; each run waits for ``release`` (set: no wait)."""

    def __init__(self) -> None:
        self.runs = 0
        self.started = threading.Event()
        self.release = threading.Event()
        self.release.set()

    def __call__(self, turns: Sequence[Mapping[str, str]]) -> bool:
        self.started.set()
        self.release.wait(5)
        self.runs += 1
        return True


def sessions(prepare: Prepare) -> Sessions:
    return Sessions(Manager(), None, None, SessionSettings(), "p", prepare)  # type: ignore[arg-type]


def block_pool(s: Sessions) -> threading.Event:
    """Both pool threads busy until the returned event is set."""
    gate = threading.Event()
    for _ in range(2):
        s._pool.submit(gate.wait, 5)
    return gate


def test_a_queued_job_is_taken_over_not_run() -> None:
    prep = Prepare()
    s = sessions(prep)
    gate = block_pool(s)
    s._prepare_window(SCOPE, "s1")  # queued behind the busy pool
    t0 = time.perf_counter()
    s._await_window(SCOPE, "s1")
    assert time.perf_counter() - t0 < 0.5  # nothing waited for
    gate.set()
    s._pool.shutdown(wait=True)
    assert prep.runs == 0  # the context embeds the window itself, once
    assert not s._preparing and not s._jobs


def test_the_next_add_queues_a_new_job_after_a_takeover() -> None:
    prep = Prepare()
    s = sessions(prep)
    gate = block_pool(s)
    s._prepare_window(SCOPE, "s1")
    s._await_window(SCOPE, "s1")
    s._prepare_window(SCOPE, "s1")  # not skipped as "already queued"
    gate.set()
    s._pool.shutdown(wait=True)
    assert prep.runs == 1


def running_job() -> tuple[Prepare, Sessions]:
    """A session "s1" whose window job has started and waits for ``release``."""
    prep = Prepare()
    prep.release.clear()
    s = sessions(prep)
    s._prepare_window(SCOPE, "s1")
    assert prep.started.wait(5)
    return prep, s


def test_a_running_job_is_waited_for() -> None:
    prep, s = running_job()
    threading.Timer(0.2, prep.release.set).start()
    t0 = time.perf_counter()
    s._await_window(SCOPE, "s1")
    assert time.perf_counter() - t0 >= 0.15
    assert prep.runs == 1  # done when the context's recall starts: its vector is cached
    s.close()


def test_waiting_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service, "PREPARE_WAIT_S", 0.1)
    prep, s = running_job()
    t0 = time.perf_counter()
    s._await_window(SCOPE, "s1")
    assert 0.08 <= time.perf_counter() - t0 < 1.0
    assert prep.runs == 0
    prep.release.set()
    s._pool.shutdown(wait=True)
    assert prep.runs == 1


def test_another_session_is_not_waited_for() -> None:
    prep, s = running_job()
    t0 = time.perf_counter()
    s._await_window(SCOPE, "s2")
    s._await_window(Scope.of(agent_id="a1", user_id="u2"), "s1")
    assert time.perf_counter() - t0 < 0.1
    prep.release.set()
    s._pool.shutdown(wait=True)
