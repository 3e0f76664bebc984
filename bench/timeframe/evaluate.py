"""Time-aware questions (issue 36 item 5), measured on bench/timeframe/questions.jsonl.

    python -m bench.timeframe.evaluate [--boosts off 0 0.5] [--out FILE.json]

Each topic is a user of its own: its episodes and distractors imported as events at the time
they were told (``km.index_records``), then each question asked with ``now`` = the set's fixed
time, ``reinforce=False``, once per ``period_boost`` (``off``: the option not passed at all,
for a tree that predates it; ``0``: time-aware ordering off). Metrics (share of questions):

- ``top1``: limit 10, threshold 0: the episode of the period the question names ranks first;
- ``top3``: … is in the top 3;
- ``mrr``: its reciprocal rank (0 when not returned);
- ``default_in`` / ``default_first``: ``km.search`` with its defaults (limit 5, default
  threshold): it is in the answer / it is the first memory of the answer.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import cli_main, eval_indices, make_kemem, stamp

HERE = Path(__file__).resolve().parent
AGENT = "tf-bench"
KEYS = ("top1", "top3", "mrr", "default_in", "default_first")


def load() -> list[dict[str, Any]]:
    lines = (HERE / "questions.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(x) for x in lines if x]


def write(km: Any, rows: list[dict[str, Any]]) -> None:
    recs = []
    for r in rows:
        for m in r.get("memories") or []:
            recs.append(
                {
                    "id": m["id"],
                    "agent_id": AGENT,
                    "user_id": r["user"],
                    "description": m["text"],
                    "created_at": m["at"],
                }
            )
    rep = km.index_records(recs, kind="events", db="user")
    assert not rep.rejected, rep.rejected[:3]
    for user in sorted({r["user"] for r in rows}):
        km.memories.crud.refresh(km._scope(AGENT, user, "user"), {"events"})


def ask(km: Any, r: dict[str, Any], boost: str) -> dict[str, Any]:
    opts: dict[str, Any] = {"reinforce": False, "now": datetime.fromisoformat(r["now"])}
    if boost != "off":
        opts["period_boost"] = float(boost)
    q = dict(user_id=r["user"], agent_id=AGENT, **opts)
    wide = km.query(r["question"], limit=10, score_threshold=0, entity_limit=0, **q)
    ids = [h.index for h in wide.memory_events]
    dflt = [h.index for h in km.search(r["question"], **q).memory_events]
    rank = ids.index(r["gold"]) if r["gold"] in ids else None
    return {
        "id": r["id"],
        "question": r["question"],
        "gold_period": r["gold_period"],
        "rank": rank,
        "first": ids[0] if ids else None,
        "top1": rank == 0,
        "top3": rank is not None and rank < 3,
        "mrr": 0.0 if rank is None else 1.0 / (rank + 1),
        "default_in": r["gold"] in dflt,
        "default_first": bool(dflt) and dflt[0] == r["gold"],
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    rows = load()
    km = make_kemem(args.prefix)
    out: dict[str, Any] = {"stamp": stamp(km), "n": len(rows), "boosts": {}}
    with eval_indices(km, False, args.keep):
        km.init()
        write(km, rows)
        per: dict[str, list[dict[str, Any]]] = {b: [] for b in args.boosts}
        for r in rows:  # interleaved: every setting asks each question in turn
            for b in args.boosts:
                per[b].append(ask(km, r, b))
        for b, res in per.items():
            summary = {k: round(sum(float(x[k]) for x in res) / len(res), 4) for k in KEYS}
            out["boosts"][b] = {"summary": summary, "rows": res}
    km.close()
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [f"command: `{result['stamp']['command']}`", f"questions: {result['n']}", ""]
    lines.append("| period_boost | " + " | ".join(KEYS) + " |")
    lines.append("|---" * (len(KEYS) + 1) + "|")
    for b, r in result["boosts"].items():
        lines.append(f"| {b} | " + " | ".join(f"{r['summary'][k]:.3f}" for k in KEYS) + " |")
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--boosts", nargs="+", default=["0", "0.5"])
    p.add_argument("--prefix", default="bench-timeframe")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--out", type=Path, default=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(parser, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
