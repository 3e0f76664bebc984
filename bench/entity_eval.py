"""Entity recall on the entity dev set (bench/entities/): which entities a chat turn brings back.

    python -m bench.entity_eval [--corpus zh en] [--split all|a|b] [--set JSON]
        [--prefix bench-q-entities] [--reuse] [--keep] [--out FILE.json] [--dump FILE.json]

Corpus: the bundled demo corpus (Chinese: events and entities of four user scopes and two agents'
official entities) and the English dev set's events (bench/dialogue_en/events.jsonl) with
bench/entities/entities_en.jsonl, indexed with the package's own indexer. Queries:
``queries_zh.jsonl`` / ``queries_en.jsonl``: style ``about`` (1–3 gold entities, most relevant
first) and ``none`` (nothing stored is about it). Each query: the last turn is the text, the
earlier turns ``context``, ``now`` 2025-10-01 12:00, **every other option at its default**
(limit 5, so at most 5 entities; ``entity_threshold`` 0.4) — what a chat app gets.

Per query: recall (gold returned / gold), precision (gold returned / returned, over queries
that returned something), hit (some gold returned), and for ``none`` whether it returned nothing.
``--dump``: also every candidate's evidence split into keyword coverage and cosine (two runs
at threshold 0 on two cosine scales, solved per entity), for threshold and profile sweeps
offline (``python -m bench.entity_eval sweep FILE.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import cli_main, eval_indices, make_kemem, stamp

HERE = Path(__file__).resolve().parent / "entities"
EN_EVENTS = Path(__file__).resolve().parent / "dialogue_en" / "events.jsonl"
NOW = datetime(2025, 10, 1, 12, 0)
# Two entity cosine scales to solve cov and cos from; a low floor keeps every candidate's
# evidence above 0 (the engine drops the others) in both runs.
DUMP_SCALES = ((0.2, 0.8), (0.2, 1.0))


def load_queries(corpus: str, split: str = "all") -> list[dict[str, Any]]:
    with open(HERE / f"queries_{corpus}.jsonl", encoding="utf-8") as f:
        qs = [json.loads(line) for line in f if line.strip()]
    if split == "all":
        return qs
    want = 1 if split == "a" else 0
    return [q for q in qs if int(q["qid"].rsplit("-", 1)[1]) % 2 == want]


def index_corpus(km: Any, corpora: Sequence[str]) -> dict[str, int]:
    from bench.dialogue_eval import event_records

    km.init()
    counts: dict[str, int] = {}
    if "zh" in corpora:
        for name, rep in km.index_demo().items():
            counts[name] = rep.indexed + rep.updated + rep.unchanged
    if "en" in corpora:
        rep = km.index_records(event_records(km, EN_EVENTS, "written"), kind="events", db="user")
        counts["en events"] = rep.indexed + rep.updated + rep.unchanged
        text = (HERE / "entities_en.jsonl").read_text(encoding="utf-8")
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        for db in ("user", "official"):
            mine = [r for r in rows if ("user_id" in r) == (db == "user")]
            rep = km.index_records(mine, kind="entities", db=db)
            counts[f"en entities ({db})"] = rep.indexed + rep.updated + rep.unchanged
    return counts


def ask(km: Any, q: dict[str, Any], **options: Any) -> Any:
    turns = q["turns"]
    context = "\n".join(f"{t['speaker']}：{t['text']}" for t in turns[:-1])
    return km.query(
        turns[-1]["text"],
        user_id=q["user_id"],
        agent_id=q["agent_id"],
        context=context,
        now=NOW,
        **options,
    )


def score_query(returned: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """One query's entity metrics; ``none`` queries (no gold) count only ``clean``."""
    got = set(returned)
    if not gold:
        return {"clean": float(not got), "returned": float(len(got))}
    right = len(got & set(gold))
    out = {
        "recall": right / len(gold),
        "hit": float(right > 0),
        "primary": float(gold[0] in got),
        "returned": float(len(got)),
    }
    if got:
        out["precision"] = right / len(got)
    return out


def summarise(rows: Iterable[dict[str, float]]) -> dict[str, float]:
    rows = list(rows)
    out: dict[str, float] = {"n": len(rows)}
    for key in ("recall", "precision", "hit", "primary", "clean", "returned"):
        vals = [r[key] for r in rows if key in r]
        if vals:
            out[key] = round(sum(vals) / len(vals), 3)
    return out


def run_set(km: Any, corpus: str, split: str, extra: dict[str, Any]) -> dict[str, Any]:
    queries = load_queries(corpus, split)
    per_query = {}
    by_style: dict[str, list[dict[str, float]]] = {}
    for q in queries:
        resp = ask(km, q, **extra)
        ids = [h.index["index"] for h in resp.memory_entities]
        m = score_query(ids, q["gold"])
        per_query[q["qid"]] = {"returned": ids, "scores": [h.score for h in resp.memory_entities]}
        by_style.setdefault(q["style"], []).append(m)
    return {
        "n": len(queries),
        "by_style": {s: summarise(rows) for s, rows in sorted(by_style.items())},
        "queries": per_query,
    }


def dump_candidates(km: Any, corpus: str) -> list[dict[str, Any]]:
    """Every query's candidates at threshold 0 (20 at most) with their keyword coverage and
    cosine, solved from the evidence on two cosine scales (evidence is linear in both)."""
    out = []
    for q in load_queries(corpus):
        runs = []
        for floor, ceil in DUMP_SCALES:
            resp = ask(
                km,
                q,
                entity_threshold=0.0,
                bridge_threshold=1.0,
                entity_limit=20,
                entity_vec_floor=floor,
                entity_vec_ceil=ceil,
            )
            runs.append({h.index["index"]: h.score for h in resp.memory_entities})
            profile = resp.additional_info.profile
        (f1, c1), (_, c2) = DUMP_SCALES
        cands = {}
        for eid in runs[0].keys() & runs[1].keys():
            # s_i = 0.6·cov + 0.4·(cos − f)/(c_i − f)  →  two equations, two unknowns
            d = runs[0][eid] - runs[1][eid]
            x = d / (0.4 * (1 / (c1 - f1) - 1 / (c2 - f1)))  # cos − f
            cov = (runs[0][eid] - 0.4 * x / (c1 - f1)) / 0.6
            cands[eid] = {"cov": round(cov, 4), "cos": round(x + f1, 4)}
        out.append(
            {
                "qid": q["qid"],
                "style": q["style"],
                "gold": q["gold"],
                "profile": profile,
                "candidates": cands,
            }
        )
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    km = make_kemem(args.prefix)
    extra = json.loads(args.set) if args.set else {}
    result: dict[str, Any] = {
        "eval_set": "entities",
        "split": args.split,
        "overrides": extra,
        "settings": "defaults (limit 5, entity_threshold 0.4), context = earlier turns, "
        "now=2025-10-01T12:00",
    }
    with eval_indices(km, args.reuse, args.keep) as fresh:
        if fresh:
            result["index"] = index_corpus(km, args.corpus)
        result["sets"] = {}
        for corpus in args.corpus:
            r = run_set(km, corpus, args.split, extra)
            result["sets"][corpus] = r
            for style, m in r["by_style"].items():
                print(f"  {corpus} {style:6s} {m}", file=sys.stderr)
        if args.dump:
            dump = {c: dump_candidates(km, c) for c in args.corpus}
            args.dump.write_text(json.dumps(dump, ensure_ascii=False), encoding="utf-8")
    result["stamp"] = stamp(km)
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"**entity dev set** (split {result['split']}; {result['settings']}; "
        f"overrides {result['overrides'] or 'none'})",
        "",
        "| set | style | n | recall | precision | hit | primary | nothing returned | returned |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for corpus, r in result["sets"].items():
        for style, m in r["by_style"].items():
            cells = [
                f"{m[k]:.3f}" if k in m else "–"
                for k in ("recall", "precision", "hit", "primary", "clean", "returned")
            ]
            lines.append(f"| {corpus} | {style} | {m['n']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


KW_GRID = (0.5, 0.6, 0.7, 0.8, 0.9)
SCALE_GRID = ((0.58, 0.76), (0.62, 0.80), (0.66, 0.84), (0.70, 0.88), (0.74, 0.92), (0.78, 0.96))
THRESHOLD_GRID = (0.3, 0.35, 0.4, 0.45, 0.5)


def sweep(path: Path, split: str = "all") -> str:
    """Offline: the metrics of evidence profiles over a ``--dump`` (kw weight, cosine floor
    and ceiling, threshold; the top ``limit`` 5 above the threshold, as the engine returns)."""
    dump = json.loads(path.read_text(encoding="utf-8"))
    lines = []
    for corpus, rows in dump.items():
        if split != "all":
            want = 1 if split == "a" else 0
            rows = [r for r in rows if int(r["qid"].rsplit("-", 1)[1]) % 2 == want]
        for kw in KW_GRID:
            for floor, ceil in SCALE_GRID:
                for t in THRESHOLD_GRID:
                    by_style: dict[str, list[dict[str, float]]] = {}
                    for r in rows:
                        ev = {
                            eid: kw * c["cov"] + (1 - kw) * (c["cos"] - floor) / (ceil - floor)
                            for eid, c in r["candidates"].items()
                        }
                        top = sorted(
                            (e for e in ev if ev[e] >= t and ev[e] > 0), key=ev.get, reverse=True
                        )[:5]
                        by_style.setdefault(r["style"], []).append(score_query(top, r["gold"]))
                    a, n = summarise(by_style.get("about", [])), summarise(by_style.get("none", []))
                    lines.append(
                        f"{corpus} kw {kw:.1f} cos {floor:.2f}-{ceil:.2f} t {t:.2f}  "
                        f"recall {a.get('recall', 0):.3f} precision {a.get('precision', 0):.3f} "
                        f"hit {a.get('hit', 0):.3f} | none clean {n.get('clean', 0):.3f}"
                    )
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", nargs="+", choices=["zh", "en"], default=["zh", "en"])
    p.add_argument("--split", choices=["all", "a", "b"], default="all")
    p.add_argument("--set", default="", help="JSON of extra query options (QueryParams)")
    p.add_argument("--prefix", default="bench-q-entities")
    p.add_argument("--reuse", action="store_true", help="indices already there: query only")
    p.add_argument("--keep", action="store_true", help="keep the indices afterwards")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--dump", type=Path, default=None, help="candidates' coverage and cosine")
    return p


if __name__ == "__main__":
    if sys.argv[1:2] == ["sweep"]:
        print(sweep(Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "all"))
        raise SystemExit(0)
    raise SystemExit(cli_main(parser, run, markdown))
