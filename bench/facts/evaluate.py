"""Facts that change (issue 36), measured on the correction dev set (bench/facts/).

    python -m bench.facts.evaluate [--forms text entities import] [--limit N] [--out FILE.json]

Each scenario gets a scope of its own (user ``facts-<id>``): the distractors, the old fact, more
distractors, then the new fact, written with the package's defaults (dedup on). Forms:
``text`` — ``km.add(text)`` (said now: events); ``entities`` — ``km.add`` of entity records
about the user (``entity_name`` = the user's name, 用户属性, the old fact dated 2025-03-01,
the new one 2025-09-01; the first person turned into the name); ``import`` — the same records
through ``km.index_records`` (one call per scenario: old first). Every question is asked with
``reinforce=False``. Metrics (share of scenarios):

- ``new_above_stale``: limit 10, threshold 0: the new fact is returned and ranks above the
  stale one (or the stale one is not returned);
- ``new_in_default`` / ``stale_alone``: ``km.search`` with its defaults (limit 5, default
  threshold): the new fact is in the answer / the stale one is and the new one is not;
- ``past_top3``: the past question, limit 10, threshold 0: the old fact is in the top 3
  (``past_top3_default``: at the default threshold);
- ``false_supersession`` (pairs.jsonl: two different facts about one subject, written a then b):
  the share of pairs where either memory ends up superseded.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import cli_main, eval_indices, make_kemem, stamp

HERE = Path(__file__).resolve().parent
AGENT = "facts-bench"
FORMS = ("text", "entities", "import")
OLD_T, NEW_T, OTHER_T = "2025-03-01 10:00:00", "2025-09-01 10:00:00", "2025-01-15 10:00:00"


def load(name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (HERE / name).read_text(encoding="utf-8").splitlines() if x]


def third_person(text: str, name: str) -> str:
    return text.replace("我", name)


def entity(text: str, name: str, when: str, keyword: str = "") -> dict[str, Any]:
    return {
        "entity_name": name,
        "entity_type": "客体",
        "kind": "用户属性",
        "keyword": keyword,
        "description": third_person(text, name),
        "updatetime": when,
        "user_name": name,
    }


def superseded(m: Any) -> bool:
    return bool(getattr(m, "superseded_by", None))


def write_scenario(km: Any, s: dict[str, Any], form: str) -> tuple[str, str]:
    """Write one scenario; (old id, new id)."""
    user = f"facts-{form}-{s['id']}"
    half = len(s["distractors"]) // 2
    before, after = s["distractors"][:half], s["distractors"][half:]
    if form == "text":
        for d in before:
            km.add(d, user_id=user, agent_id=AGENT)
        (old,) = km.add(s["old"], user_id=user, agent_id=AGENT)
        for d in after:
            km.add(d, user_id=user, agent_id=AGENT)
        (new,) = km.add(s["new"], user_id=user, agent_id=AGENT)
        km.memories.crud.refresh(_scope(km, user), {"events"})
        return old.id, new.id
    name, kw = s["name"], s["keyword"]
    recs = [entity(d, name, OTHER_T) for d in before]
    old_rec = {**entity(s["old"], name, OLD_T, kw), "id": f"{s['id']}-old"}
    new_rec = {**entity(s["new"], name, NEW_T, kw), "id": f"{s['id']}-new"}
    recs += [old_rec] + [entity(d, name, OTHER_T) for d in after] + [new_rec]
    for i, r in enumerate(recs):
        r.setdefault("id", f"{s['id']}-d{i}")
        r.update(agent_id=AGENT, user_id=user)
    if form == "import":
        km.index_records(recs, kind="entities", db="user")
    else:
        for r in recs:
            km.add(r, user_id=user, agent_id=AGENT, kind="entities")
    km.memories.crud.refresh(_scope(km, user), {"entities"})
    return old_rec["id"], new_rec["id"]


def _scope(km: Any, user: str) -> Any:
    return km._scope(AGENT, user, "user")


def ids(resp: Any, form: str) -> list[str]:
    """The returned memories of the form's kind, in the answer's order."""
    if form == "text":
        return [h.index for h in resp.memory_events]
    return [h.index["index"] for h in resp.memory_entities]


def rank_of(xs: list[str], x: str) -> int | None:
    return xs.index(x) if x in xs else None


def run_form(km: Any, scenarios: list[dict[str, Any]], form: str) -> dict[str, Any]:
    rows = []
    for s in scenarios:
        old_id, new_id = write_scenario(km, s, form)
        user = f"facts-{form}-{s['id']}"
        q = dict(user_id=user, agent_id=AGENT, reinforce=False)
        wide = ids(
            km.query(s["question"], limit=10, score_threshold=0, entity_threshold=0, **q), form
        )
        dflt = ids(km.search(s["question"], **q), form)
        past = ids(
            km.query(s["past_question"], limit=10, score_threshold=0, entity_threshold=0, **q),
            form,
        )
        past_d = ids(km.search(s["past_question"], **q), form)
        rn, ro = rank_of(wide, new_id), rank_of(wide, old_id)
        old_mem = km.get(old_id, user_id=user, agent_id=AGENT)
        rows.append(
            {
                "id": s["id"],
                "slot": s["slot"],
                "new_rank": rn,
                "old_rank": ro,
                "new_above_stale": rn is not None and (ro is None or rn < ro),
                "new_in_default": new_id in dflt,
                "stale_alone": old_id in dflt and new_id not in dflt,
                "past_top3": old_id in past[:3],
                "past_top3_default": old_id in past_d[:3],
                "old_superseded": superseded(old_mem),
            }
        )
    keys = ["new_above_stale", "new_in_default", "stale_alone", "past_top3",
            "past_top3_default", "old_superseded"]  # fmt: skip
    summary = {k: round(sum(r[k] for r in rows) / len(rows), 4) for k in keys}
    by_slot: dict[str, dict[str, float]] = {}
    for slot in dict.fromkeys(r["slot"] for r in rows):
        sub = [r for r in rows if r["slot"] == slot]
        by_slot[slot] = {k: round(sum(r[k] for r in sub) / len(sub), 3) for k in keys}
    return {"n": len(rows), "summary": summary, "by_slot": by_slot, "rows": rows}


def run_pairs(km: Any, pairs: list[dict[str, Any]], form: str) -> dict[str, Any]:
    bad = []
    for p in pairs:
        user = f"facts-pair-{form}-{p['id']}"
        if form == "text":
            (a,) = km.add(p["a"], user_id=user, agent_id=AGENT)
            (b,) = km.add(p["b"], user_id=user, agent_id=AGENT)
            a_id, b_id = a.id, b.id
        else:
            ra = {**entity(p["a"], p["name"], OLD_T), "id": f"{p['id']}-a"}
            rb = {**entity(p["b"], p["name"], NEW_T), "id": f"{p['id']}-b"}
            km.add(ra, user_id=user, agent_id=AGENT, kind="entities")
            km.add(rb, user_id=user, agent_id=AGENT, kind="entities")
            a_id, b_id = ra["id"], rb["id"]
        kinds = "events" if form == "text" else "entities"
        ma = km.get(a_id, user_id=user, agent_id=AGENT, kind=kinds)
        mb = km.get(b_id, user_id=user, agent_id=AGENT, kind=kinds)
        if a_id == b_id or superseded(ma) or superseded(mb):
            bad.append({"id": p["id"], "a": p["a"], "b": p["b"], "same": a_id == b_id})
    return {"n": len(pairs), "false_supersession": round(len(bad) / len(pairs), 4), "bad": bad}


def run(args: argparse.Namespace) -> dict[str, Any]:
    scenarios = load(args.scenarios)[: args.limit]
    pairs = load("pairs.jsonl")[: args.limit] if not args.no_pairs else []
    km = make_kemem(args.prefix)
    out: dict[str, Any] = {"stamp": stamp(km), "forms": {}, "pairs": {}}
    with eval_indices(km, False, args.keep):
        km.init()
        for form in args.forms:
            t0 = time.perf_counter()
            out["forms"][form] = run_form(km, scenarios, form)
            out["forms"][form]["seconds"] = round(time.perf_counter() - t0, 1)
            if form != "import" and pairs:
                out["pairs"][form] = run_pairs(km, pairs, form)
    km.close()
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = [f"command: `{result['stamp']['command']}`", ""]
    keys = ["new_above_stale", "new_in_default", "stale_alone", "past_top3",
            "past_top3_default", "old_superseded"]  # fmt: skip
    lines.append("| form | n | " + " | ".join(keys) + " | false supersession |")
    lines.append("|---" * (len(keys) + 3) + "|")
    for form, r in result["forms"].items():
        fs = result["pairs"].get(form, {}).get("false_supersession", "—")
        vals = " | ".join(f"{r['summary'][k]:.3f}" for k in keys)
        lines.append(f"| {form} | {r['n']} | {vals} | {fs} |")
    for form, r in result["forms"].items():
        lines.append(f"\n{form} by slot:")
        for slot, v in r["by_slot"].items():
            lines.append(f"  {slot}: " + ", ".join(f"{k}={x}" for k, x in v.items()))
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--forms", nargs="+", choices=list(FORMS), default=list(FORMS))
    p.add_argument("--limit", type=int, default=None)
    p.add_argument(
        "--scenarios", default="scenarios.jsonl", help="check.jsonl: 20 written after the rules"
    )
    p.add_argument("--no-pairs", action="store_true")
    p.add_argument("--prefix", default="bench-facts")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--out", type=Path, default=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(parser, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
