"""How the latin entity profile was chosen: evidence profiles over the entity dev set's dump.

    python bench/results/2026-11-26-quality/round8/entity_grid.py \
        bench/results/2026-11-26-quality/round8/entities_dump.json

The dump (``python -m bench.entity_eval --dump``) holds every candidate's keyword coverage and
cosine. Evidence = kw·coverage + (1 − kw)·(cos − floor)/0.18, the top 5 at or above t. A
profile is chosen on half a (odd query numbers) by the F1 of recall and precision among those
whose `none` turns get nothing in at least 85 %; b is the check. Then, for the profile
chosen (coverage alone, 2.5 x coverage >= 0.4), a bonus for an entity whose name the turns say
(its name's words among the turns' words, the scope's user and agent names left out: how the
engine's search words see it), chosen the same way; and the same bonus on the Chinese
evidence. Output: entity_grid.txt.
"""

from __future__ import annotations

import itertools
import json
import re
import sys
from pathlib import Path

from bench.entity_eval import HERE, score_query, summarise


def run(rows: list[dict], kw: float, floor: float, t: float) -> tuple[float, ...]:
    by_style: dict[str, list[dict[str, float]]] = {}
    for r in rows:
        ev = {
            e: kw * c["cov"] + (1 - kw) * (c["cos"] - floor) / 0.18
            for e, c in r["candidates"].items()
        }
        top = sorted((e for e in ev if ev[e] >= t and ev[e] > 0), key=ev.get, reverse=True)[:5]
        by_style.setdefault(r["style"], []).append(score_query(top, r["gold"]))
    a, n = summarise(by_style["about"]), summarise(by_style["none"])
    return a.get("recall", 0), a.get("precision", 0), a.get("hit", 0), n.get("clean", 0)


def main(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)["en"]

    def half(h: str) -> list[dict]:
        return [r for r in rows if int(r["qid"].rsplit("-", 1)[1]) % 2 == (h == "a")]

    kws, floors = (0.6, 0.7, 0.8, 0.9, 1.0), (0.70, 0.74, 0.78, 0.82)
    grid = itertools.product(kws, floors, (0.06, 0.08, 0.1, 0.12, 0.14, 0.16, 0.2))
    out = []
    for kw, floor, t in grid:
        a, b, both = (run(x, kw, floor, t) for x in (half("a"), half("b"), rows))
        f1 = 2 * a[0] * a[1] / (a[0] + a[1]) if a[0] + a[1] else 0.0
        out.append((f1 if a[3] >= 0.85 else 0.0, kw, floor, t, a, b, both))
    out.sort(key=lambda r: -r[0])
    print("rank: F1 on half a (none turns clean >= 0.85); R / P / hit / clean per half and all")
    for r in out[:10]:
        print(f"F1_a {r[0]:.3f} kw {r[1]} floor {r[2]} t {r[3]}  a {r[4]}  b {r[5]}  all {r[6]}")
    before = [run(x, 0.6, 0.62, 0.4) for x in (half("a"), half("b"), rows)]
    print(f"the old evidence (0.6 / 0.62-0.80 / 0.4): a {before[0]}  b {before[1]}", end="")
    print(f"  all {before[2]}")


def name_bonus(rows: list[dict], bonus: float) -> tuple[float, ...]:
    """Coverage alone (2.5 x, capped at 1) plus ``bonus`` for a named entity, threshold 0.4."""
    queries = {q["qid"]: q for q in _jsonl(HERE / "queries_en.jsonl")}
    entities = {e["id"]: e for e in _jsonl(HERE / "entities_en.jsonl")}
    own: dict[tuple, set[str]] = {}
    for e in entities.values():
        names = {n.lower() for n in (e.get("user_name"), e.get("agent_name")) if n}
        own.setdefault((e["agent_id"], e.get("user_id")), set()).update(names)
    by_style: dict[str, list[dict[str, float]]] = {}
    for r in rows:
        q = queries[r["qid"]]
        said = set(re.findall(r"[a-z]+", " ".join(t["text"] for t in q["turns"]).lower()))
        said -= own.get((q["agent_id"], q["user_id"]), set()) | own.get(
            (q["agent_id"], None), set()
        )
        ev = {}
        for e, c in r["candidates"].items():
            name = set(re.findall(r"[a-z]+", entities[e]["entity_name"].lower())) - {"dr"}
            ev[e] = min(1.0, 2.5 * c["cov"]) + (bonus if name & said else 0.0)
        top = sorted((e for e in ev if ev[e] >= 0.4), key=ev.get, reverse=True)[:5]
        by_style.setdefault(r["style"], []).append(score_query(top, r["gold"]))
    a, n = summarise(by_style["about"]), summarise(by_style["none"])
    return a.get("recall", 0), a.get("precision", 0), a.get("hit", 0), n.get("clean", 0)


def name_bonus_zh(rows: list[dict], bonus: float) -> tuple[float, ...]:
    """The Chinese evidence (0.6·coverage + 0.4·vec on 0.62–0.80) plus ``bonus`` when the turns
    say a (not generic) entity's name that is not the scope's user or agent, threshold 0.4."""
    queries = {q["qid"]: q for q in _jsonl(HERE / "queries_zh.jsonl")}
    demo = HERE.parents[1] / "kemem_es" / "demo"
    entities = {
        e["id"]: e
        for name in ("user_entities.jsonl", "official_entities.jsonl")
        for e in _jsonl(demo / name)
    }
    own: dict[tuple, set[str]] = {}
    for e in entities.values():
        names = {n for n in (e.get("user_name"), e.get("agent_name")) if n}
        own.setdefault((e["agent_id"], e.get("user_id")), set()).update(names)
    by_style: dict[str, list[dict[str, float]]] = {}
    for r in rows:
        q = queries[r["qid"]]
        text = " ".join(t["text"] for t in q["turns"])
        scope = own.get((q["agent_id"], q["user_id"]), set()) | own.get(
            (q["agent_id"], None), set()
        )
        ev = {}
        for e, c in r["candidates"].items():
            ent = entities[e]
            named = ent["entity_type"] != "泛化实体" and ent["entity_name"] not in scope
            said = named and ent["entity_name"] in text
            score = min(1.0, 0.6 * c["cov"] + 0.4 * (c["cos"] - 0.62) / 0.18)
            ev[e] = score + (bonus if said else 0.0)
        top = sorted((e for e in ev if ev[e] >= 0.4 and ev[e] > 0), key=ev.get, reverse=True)[:5]
        by_style.setdefault(r["style"], []).append(score_query(top, r["gold"]))
    a, n = summarise(by_style["about"]), summarise(by_style["none"])
    return a.get("recall", 0), a.get("precision", 0), a.get("hit", 0), n.get("clean", 0)


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def bonuses(path: str) -> None:
    with open(path, encoding="utf-8") as f:
        dump = json.load(f)
    for lang, run_bonus in (("en", name_bonus), ("zh", name_bonus_zh)):
        rows = dump[lang]
        print(f"\n{lang}: name bonus on top of the profile: R / P / hit / clean on a, b, all")
        for bonus in (0.0, 0.1, 0.2, 0.3, 0.4):
            halves = [
                run_bonus([r for r in rows if int(r["qid"].rsplit("-", 1)[1]) % 2 == h], bonus)
                for h in (1, 0)
            ]
            a = halves[0]
            f1 = 2 * a[0] * a[1] / (a[0] + a[1]) if a[0] + a[1] else 0.0
            both = run_bonus(rows, bonus)
            print(f"bonus {bonus}  F1_a {f1:.3f}  a {a}  b {halves[1]}  all {both}")


if __name__ == "__main__":
    main(sys.argv[1])
    bonuses(sys.argv[1])
