"""A child process for the crash test (tests/test_sessions_crash.py): ``add`` appends the
scripted dialogue's first 20 turns to a session (the batch is claimed, then its LLM call hangs
until the parent kills this process); ``resume`` waits out the lease, resumes the open batches,
drains and prints what it did as JSON. Settings come from KEMEM_* in the environment."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from kemem_es import Kemem

DATA = Path(__file__).resolve().parents[2] / "bench" / "session_fallback" / "dialogue_30.jsonl"
A = {"user_id": "u_crash", "agent_id": "qiyu", "user_name": "木木", "agent_name": "祁煜"}


def main(mode: str) -> None:
    km = Kemem()
    if mode == "add":
        rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
        turns = [{"role": r["role"], "content": r["content"]} for r in rows[:20]]
        km.add(turns, session_id="crash", **A)
        print("added", flush=True)
        time.sleep(600)  # the batch's extraction hangs at the stub; the parent kills us
    else:
        time.sleep(km.settings.session_lease_s + 0.5)
        started = km.resume_sessions()
        km.drain()
        again = km.resume_sessions()
        km.drain()
        print(json.dumps({"resumed": started, "again": again}), flush=True)
        km.close()


if __name__ == "__main__":
    main(sys.argv[1])
