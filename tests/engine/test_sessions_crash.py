"""A process killed (SIGKILL) between a batch's claim and its write: the next process extracts
that batch exactly once — no memory lost, none written twice (docs/sessions.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from llm_stub import Reply, chat, serve_stub

from kemem_es import Kemem
from kemem_es.store.sessions import SessionStore, batch_key

CHILD = Path(__file__).resolve().parent / "session_child.py"
SCOPE = {"user_id": "u_crash", "agent_id": "qiyu"}
ANSWER = Path(__file__).resolve().parents[2] / "bench" / "session_fallback" / "dev.jsonl"


def _events() -> dict:
    """Two events from the dev set's lines (texts stay out of the test's source)."""
    lines = [json.loads(x)["content"] for x in ANSWER.read_text(encoding="utf-8").splitlines()]
    return {
        "events": [{"description": f"木木说{lines[0]}"}, {"description": f"木木说{lines[8]}"}],
        "entities": [],
    }


@pytest.mark.engine
def test_a_batch_killed_mid_extraction_is_extracted_exactly_once(kemem: Kemem) -> None:
    kemem.init()
    with serve_stub(_events()) as stub:
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(
                [str(CHILD.parents[2]), str(CHILD.parents[1]), os.environ.get("PYTHONPATH", "")]
            ),
            KEMEM_ES_URL=kemem.settings.url,
            KEMEM_INDEX_PREFIX=kemem.settings.index_prefix,
            KEMEM_MODEL_DIR=str(kemem.settings.model_dir),
            KEMEM_LLM_BASE_URL=stub.url,
            KEMEM_LLM_MODEL="stub",
            KEMEM_LLM_TIMEOUT_S="120",
            KEMEM_SESSION_LEASE_S="3",
        )
        # The first call hangs (the child is killed while it waits); later ones answer.
        stub.answer(Reply(delay=300), Reply(body=chat(json.dumps(_events(), ensure_ascii=False))))
        child = subprocess.Popen(
            [sys.executable, str(CHILD), "add"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            deadline = time.monotonic() + 120
            while not stub.requests and time.monotonic() < deadline:
                assert child.poll() is None, child.stdout.read() if child.stdout else ""
                time.sleep(0.1)
            assert len(stub.requests) == 1  # claimed, and its extraction under way
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        finally:
            if child.poll() is None:
                child.kill()
        scope = kemem._scope("qiyu", "u_crash", "user")
        store = SessionStore(kemem.engine)
        (batch,) = store.get_docs(scope, [batch_key("crash", 0)])
        assert batch is not None and batch.source["status"] == "claimed"
        assert kemem.count(**SCOPE) == 0  # nothing written before the kill

        out = subprocess.run(
            [sys.executable, str(CHILD), "resume"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        report = json.loads(out.stdout.strip().splitlines()[-1])
        assert report == {"resumed": 1, "again": 0}
        (batch,) = store.get_docs(scope, [batch_key("crash", 0)])
        assert batch is not None and batch.source["status"] == "done"
        assert batch.source["attempts"] == 2
        assert len(stub.requests) == 2  # the killed call and the one that finished
        kemem.engine.refresh(f"{kemem.settings.index_prefix}-*")
        assert kemem.count(**SCOPE) == 2  # each event once
        assert sorted(batch.source["memory_ids"]) == sorted(
            m.id for m in kemem.get_all(**SCOPE).results
        )
