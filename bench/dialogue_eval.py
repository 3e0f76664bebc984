"""Retrieval quality on the dialogue dev set (bench/dialogue/): every mode, through the API.

    python -m bench.dialogue_eval [--modes fusion bm25 ...] [--set '{"half_life_days": 365}']
        [--split all|a|b] [--styles recall situational long] [--reuse] [--keep] [--out FILE.json]
        [--corpus zh|en|check|fresh|hard|implied] [--keywords written|tfidf|none]

Corpus: the bundled demo corpus (user + official events and entities, kemem_es/demo/) plus
bench/dialogue/extra_events.jsonl and extra_events_long.jsonl (the long set's near-miss
distractors), indexed with the package's own indexer. Two sets share it: the short set (styles
``recall`` and ``situational``, 334 queries) and the long set (style ``long``: 5–8 turns whose
last user turn alone is vague); every mode is reported per set, per style and over all. Each
query: the last user turn is the query text, the earlier turns are ``context`` (one
``speaker：text`` line per turn, oldest first), ``now`` = 2025-10-01 12:00, limit 10,
score_threshold 0, every other option at its default (expansion on). Metrics: R@1/5/10, nDCG@10
(graded: the memory the dialogue was written for 2, related ones 1), MRR. ``--split a|b``: the
odd / even queries of each pair (tune on one half, check on the other).

``--corpus en``: the English dev set (bench/dialogue_en/) instead: its memories only, the
dialogue set (style ``english``), the question set (``english_question``) and the questions
about long session summaries (``english_session``, in scopes of their own).
``--corpus check``: the Chinese check set (bench/dialogue_check/, style ``check``): 200
dialogues over five new users' memories (85 each, with place and scene), written blind in round
9 and run only to check, never to choose a setting; and its English part (style
``check_session``): 100 one-turn questions over two more users' 50 session summaries.
``--corpus fresh``: the fresh check set (bench/dialogue_fresh/, style ``fresh``): 160 dialogues
over four more users' memories (85 each), written blind in round 14 to the check set's brief.
``--corpus hard``: the hard dev set (bench/dialogue_hard/, style ``hard``): 160 dialogues over
four more users' memories, written to the same brief as a set to tune on in the check sets'
regime (threads of near misses, the target's words kept out).
``--corpus implied``: the implied-memory dev set (bench/dialogue_implied/, style ``implied``):
160 four-turn dialogues over four more users' memories (40 each, ten same-topic families of four:
every memory is one dialogue's target and its three family members are that dialogue's hard
negatives); the last turn implies the memory without naming it. Style ``implied_drift``: 40
more dialogues whose earlier turns name one memory of a family and whose last turn implies
another, the only gold.
``--distractors``: every scope the set's queries ask also holds the other users' Chinese
memories of the check, fresh, hard and implied sets (~1,180 more, each scope's own names put in
place of their user's and agent's names): a store ~15× larger, in the same style, whose
memories never answer the set's dialogues (the stores of a real app, and of the held-out sets,
are larger than these sets' 40–85 memories a user).
``--keywords tfidf|none``: every event's keywords from the package's TF-IDF picker, or none,
instead of the written ones (either corpus; the demo's entities stay as they are).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import cli_main, eval_indices, make_kemem, percentiles, stamp
from bench.evalset import METRICS, mean_metrics, metrics

HERE = Path(__file__).resolve().parent / "dialogue"
# --corpus: the Chinese sets over the demo corpus, the English set (bench/dialogue_en/), or the
# Chinese check set (bench/dialogue_check/: its own corpus, written blind, never tuned on).
CORPORA = {
    "zh": HERE,
    "en": Path(__file__).resolve().parent / "dialogue_en",
    "check": Path(__file__).resolve().parent / "dialogue_check",
    "fresh": Path(__file__).resolve().parent / "dialogue_fresh",
    "hard": Path(__file__).resolve().parent / "dialogue_hard",
    "implied": Path(__file__).resolve().parent / "dialogue_implied",
}
MODES = ("fusion", "bm25", "vector", "rrf", "two_stage")


STYLES = (
    "recall",
    "situational",
    "long",
    "english",
    "english_question",
    "english_session",
    "check",
    "check_session",
    "fresh",
    "hard",
    "implied",
    "implied_drift",
)
SETS = {
    "short": ("recall", "situational"),
    "long": ("long",),
    "english": ("english",),
    "english_question": ("english_question",),
    "english_session": ("english_session",),
    "check": ("check",),
    "check_session": ("check_session",),
    "fresh": ("fresh",),
    "hard": ("hard",),
    "implied": ("implied",),
    "implied_drift": ("implied_drift",),
}
# the styles a corpus holds (the default of --styles)
CORPUS_STYLES = {
    "zh": STYLES[:3],
    "en": STYLES[3:6],
    "check": ("check", "check_session"),
    "fresh": ("fresh",),
    "hard": ("hard",),
    "implied": ("implied", "implied_drift"),
}


def load_queries(
    split: str = "all", styles: Sequence[str] = STYLES, corpus: str = "zh"
) -> list[dict[str, Any]]:
    with open(CORPORA[corpus] / "queries.jsonl", encoding="utf-8") as f:
        qs = [q for q in map(json.loads, f) if q["style"] in styles]
    if split == "all":
        return qs
    want = 1 if split == "a" else 0
    return [q for q in qs if int(q["qid"].rsplit("-", 1)[1]) % 2 == want]


def qrels(corpus: str = "zh") -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for line in (CORPORA[corpus] / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, rel = line.split("\t")
        out.setdefault(qid, {})[doc] = int(rel)
    return out


def query_text(q: dict[str, Any]) -> tuple[str, str]:
    """(utterance, context): the last turn, and the earlier turns as ``speaker：text`` lines."""
    turns = q["turns"]
    context = "\n".join(f"{t['speaker']}：{t['text']}" for t in turns[:-1])
    return turns[-1]["text"], context


def ask(km: Any, q: dict[str, Any], **options: Any) -> Any:
    """One dialogue query as the set defines it: last turn, earlier turns as context, limit
    10, threshold 0, the query's ``now``; ``options`` (mode, settings) on top."""
    text, context = query_text(q)
    return km.query(
        text,
        user_id=q["user_id"],
        agent_id=q["agent_id"],
        context=context,
        now=datetime.fromisoformat(q["now"]),
        **{"limit": 10, "score_threshold": 0.0, **options},
    )


def event_records(km: Any, path: Path, keywords: str, names: bool = True) -> list[Any]:
    """Event memories of a JSONL file; ``keywords``: as written (an upstream extractor's), the
    package's own TF-IDF picker (top 5, the user's and agent's names excluded), or none.
    ``names`` False: without ``user_name`` / ``agent_name``, as a caller that does not set them
    would write them (the picker then cannot leave the names out either)."""
    from kemem_es import EventRecord
    from kemem_es.text.keywords import pick_base_words

    out = []
    with open(path, encoding="utf-8") as f:
        for row in map(json.loads, f):
            if not names:
                row.pop("user_name", None)
                row.pop("agent_name", None)
            if keywords == "tfidf":
                own = [n for n in (row.get("user_name"), row.get("agent_name")) if n]
                picked = pick_base_words(row["description"], 5, own, km.tokenizer)
                row["keywords"] = [b.word for b in picked]
            elif keywords == "none":
                row["keywords"] = []
            out.append(EventRecord(**row))
    return out


# the Chinese sets whose memories --distractors copies into every scope
DISTRACTOR_CORPORA = ("check", "fresh", "hard", "implied")
_HAN = re.compile(r"[\u4e00-\u9fff]")


def _renamed(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for old, new in names.items():
            value = value.replace(old, new)
        return value
    if isinstance(value, list):
        return [_renamed(v, names) for v in value]
    return value


def distractor_records(
    scopes: set[tuple[str, str]], keywords: str, names: bool = True
) -> list[Any]:
    """For each (agent_id, user_id) scope: every Chinese memory of DISTRACTOR_CORPORA that is
    not that scope's own, copied into it under a new id, its user's and agent's names replaced
    by the scope's (so that a name never tells a distractor apart); keywords as written, or none
    with ``keywords`` "none" (the TF-IDF picker is not applied to them)."""
    from kemem_es import EventRecord

    rows = []
    for corpus in DISTRACTOR_CORPORA:
        with open(CORPORA[corpus] / "events.jsonl", encoding="utf-8") as f:
            rows += [r for r in map(json.loads, f) if _HAN.search(r["description"])]
    own = {(r["agent_id"], r["user_id"]): (r.get("user_name"), r.get("agent_name")) for r in rows}
    out = []
    for agent, user in sorted(scopes & own.keys()):  # a Chinese scope (not check's English)
        user_name, agent_name = own[(agent, user)]
        for row in rows:
            if (row["agent_id"], row["user_id"]) == (agent, user):
                continue
            swap = {}
            if row.get("user_name") and user_name:
                swap[row["user_name"]] = user_name
            if row.get("agent_name") and agent_name:
                swap[row["agent_name"]] = agent_name
            copy = {k: _renamed(v, swap) for k, v in row.items()}
            copy.update(id=f"dx-{agent}-{user}-{row['id']}", agent_id=agent, user_id=user)
            copy["user_name"], copy["agent_name"] = user_name, agent_name
            if not names:
                copy.pop("user_name", None)
                copy.pop("agent_name", None)
            if keywords == "none":
                copy["keywords"] = []
            out.append(EventRecord(**{k: v for k, v in copy.items() if v is not None}))
    return out


def nameless_entities(path: Path) -> list[Any]:
    """Entity memories of a JSONL file without ``user_name`` / ``agent_name``."""
    from kemem_es import EntityRecord

    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [
        EntityRecord(**{k: v for k, v in r.items() if k not in ("user_name", "agent_name")})
        for r in rows
    ]


def index_corpus(
    km: Any,
    corpus: str = "zh",
    keywords: str = "written",
    names: bool = True,
    scopes: set[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """Index a corpus; ``scopes`` (not the zh corpus): also every other set's Chinese memories
    in each of them (``distractor_records``)."""
    from kemem_es.kemem import DEMO_FILES, demo_path

    t0 = time.perf_counter()

    def add(path: Path, db: str) -> int:
        rep = km.index_records(event_records(km, path, keywords, names), kind="events", db=db)
        return rep.indexed + rep.updated + rep.unchanged

    def report(n: int) -> dict[str, Any]:
        secs = round(time.perf_counter() - t0, 1)
        return {"docs": n, "seconds": secs, "keywords": keywords, "names": names}

    if corpus != "zh":
        km.init()
        n = add(CORPORA[corpus] / "events.jsonl", "user")
        if scopes:
            records = distractor_records(scopes, keywords, names)
            rep = km.index_records(records, kind="events", db="user")
            n += rep.indexed + rep.updated + rep.unchanged
        return report(n)
    if keywords == "written" and names:
        reports = km.index_demo(DEMO_FILES)
    else:  # the demo's events with other keywords or without names, its entities likewise
        entities = [f for f in DEMO_FILES if f[1] == "entities"]
        reports = km.index_demo(entities if names else [])
        if not names:
            for name, _, db in entities:
                reports[name] = km.index_records(
                    nameless_entities(demo_path(name)), kind="entities", db=db
                )
        for name, _, db in (f for f in DEMO_FILES if f[1] == "events"):
            reports[name] = km.index_records(
                event_records(km, demo_path(name), keywords, names), kind="events", db=db
            )
    n = sum(r.indexed + r.updated + r.unchanged for r in reports.values())
    for name in ("extra_events.jsonl", "extra_events_long.jsonl"):
        n += add(HERE / name, "user")
    return report(n)


def run_mode(
    km: Any, queries: Sequence[dict[str, Any]], gold: dict, mode: str, extra: dict, workers: int
) -> dict[str, Any]:
    def one(q: dict[str, Any]) -> tuple[dict[str, float], float, list[str], list[float]]:
        resp = ask(km, q, mode=mode, **extra)
        ids = [h.index for h in resp.memory_events]
        m = metrics(ids, gold[q["qid"]])
        # threshold meaning: does the memory the dialogue was written for clear 0.5, and does
        # anything else? Asked again at 0.5: the threshold applies to a memory's own score,
        # and anchor feedback can raise a memory's shown score above what it needed to pass.
        first = next(d for d, r in gold[q["qid"]].items() if r == 2)
        passed = {h.index for h in ask(km, q, mode=mode, **{**extra, "score_threshold": 0.5})
                  .memory_events}  # fmt: skip
        m["gold>=0.5"] = float(first in passed)
        m["other>=0.5"] = float(any(d not in gold[q["qid"]] for d in passed))
        scores = [round(h.score, 4) for h in resp.memory_events]
        return m, resp.additional_info.timings_ms["total"], ids, scores

    with ThreadPoolExecutor(max_workers=workers) as pool:
        rows = list(pool.map(one, queries))
    by_style: dict[str, list] = {}
    for q, r in zip(queries, rows, strict=True):
        by_style.setdefault(q["style"], []).append(r[0])
    by_set = {
        name: [m for s in styles for m in by_style.get(s, [])] for name, styles in SETS.items()
    }
    return {
        "n": len(rows),
        **mean_metrics([r[0] for r in rows]),
        "gold>=0.5": round(sum(r[0]["gold>=0.5"] for r in rows) / len(rows), 3),
        "other>=0.5": round(sum(r[0]["other>=0.5"] for r in rows) / len(rows), 3),
        "by_set": {s: {"n": len(v), **mean_metrics(v)} for s, v in by_set.items() if v},
        "by_style": {s: {"n": len(v), **mean_metrics(v)} for s, v in sorted(by_style.items())},
        "latency_ms": percentiles(r[1] for r in rows),
        "top10": {q["qid"]: r[2] for q, r in zip(queries, rows, strict=True)},
        # per query: the top 10's scores (threshold 0) and whether the written-for memory /
        # some non-relevant memory cleared 0.5 (the threshold's meaning per set)
        "scores10": {q["qid"]: r[3] for q, r in zip(queries, rows, strict=True)},
        "passed": {
            q["qid"]: [int(r[0]["gold>=0.5"]), int(r[0]["other>=0.5"])]
            for q, r in zip(queries, rows, strict=True)
        },
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.distractors and (args.corpus == "zh" or args.keywords == "tfidf"):
        # the zh corpus is the demo's own store; TF-IDF keywords would differ from the copies'
        raise SystemExit("--distractors: not with --corpus zh or --keywords tfidf")
    km = make_kemem(args.prefix, variant=args.variant)
    styles = args.styles or list(CORPUS_STYLES[args.corpus])
    queries = load_queries(args.split, styles, args.corpus)
    gold = qrels(args.corpus)
    extra = json.loads(args.set) if args.set else {}
    result: dict[str, Any] = {
        "eval_set": CORPORA[args.corpus].name,
        "corpus": args.corpus,
        "queries": len(queries),
        "split": args.split,
        "styles": list(styles),
        "overrides": extra,
        "distractors": args.distractors,
        "settings": "limit=10, score_threshold=0, context=earlier turns, now=2025-10-01T12:00",
    }
    with eval_indices(km, args.reuse, args.keep) as fresh:
        if fresh:
            scopes = {(q["agent_id"], q["user_id"]) for q in queries} if args.distractors else None
            result["index"] = index_corpus(
                km, args.corpus, args.keywords, not args.without_names, scopes
            )
        result["modes"] = {}
        for mode in args.modes or MODES:
            r = run_mode(km, queries, gold, mode, extra, args.workers)
            result["modes"][mode] = r
            print(
                f"  {mode:10s} {_line(r)} gold>=0.5={r['gold>=0.5']} other>=0.5={r['other>=0.5']}",
                file=sys.stderr,
            )
            for name, sub in [*r["by_set"].items(), *r["by_style"].items()]:
                if name in r["by_style"] and name in r["by_set"] and sub is r["by_style"][name]:
                    continue  # a set of one style (long): printed once
                print(f"    {name:12s} {_line(sub)}", file=sys.stderr)
    result["stamp"] = stamp(km)
    return result


def halves(result: dict[str, Any]) -> dict[str, dict[str, float]]:
    """R@5 per mode on each set's halves (``--split`` a = odd, b = even query numbers), read off
    the stored top 10s, so that a setting tuned on a is checked on b in the same run."""
    corpus = result.get("corpus", "zh")
    gold = qrels(corpus)
    style = {q["qid"]: q["style"] for q in load_queries(corpus=corpus)}
    out: dict[str, dict[str, float]] = {}
    for mode, r in result["modes"].items():
        cells: dict[str, list[float]] = {}
        for qid, ids in r["top10"].items():
            name = next(n for n, styles in SETS.items() if style[qid] in styles)
            half = "a" if int(qid.rsplit("-", 1)[1]) % 2 else "b"
            cells.setdefault(f"{name} {half}", []).append(metrics(ids, gold[qid])["recall@5"])
        out[mode] = {k: round(sum(v) / len(v), 3) for k, v in sorted(cells.items())}
    return out


def _line(r: dict[str, Any]) -> str:
    return " ".join(f"{m}={r[m]:.3f}" for m in METRICS) + f" n={r['n']}"


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"**dialogue dev sets** ({result['queries']} queries, split {result['split']}, "
        f"styles {', '.join(result.get('styles', STYLES))})",
        "",
        "| mode | R@1 | R@5 | R@10 | nDCG@10 | MRR | gold ≥ 0.5 | other ≥ 0.5 | p50 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in result["modes"].items():
        lines.append(
            f"| {name} | {r['recall@1']:.3f} | {r['recall@5']:.3f} | {r['recall@10']:.3f} "
            f"| {r['ndcg@10']:.3f} | {r['mrr']:.3f} | {r['gold>=0.5']:.3f} "
            f"| {r['other>=0.5']:.3f} | {r['latency_ms'].get('p50', 0):.1f} |"
        )
    split = halves(result)
    keys = sorted({k for v in split.values() for k in v})
    lines += ["", "R@5 per half:", "", "| mode | " + " | ".join(keys) + " |"]
    lines.append("|---|" + "---|" * len(keys))
    for name, cells in split.items():
        lines.append(f"| {name} | " + " | ".join(f"{cells.get(k, 0):.3f}" for k in keys) + " |")
    for group, label in (("by_set", "set"), ("by_style", "style")):
        keys = sorted({s for r in result["modes"].values() for s in r.get(group, {})})
        if group == "by_style":  # a style that is a set of its own (long) was shown as a set
            keys = [k for k in keys if k not in SETS]
        for key in keys:
            lines += [
                "",
                f"*{key}* {label}:",
                "",
                "| mode | n | R@1 | R@5 | R@10 | nDCG@10 | MRR |",
                "|---|---|---|---|---|---|---|",
            ]
            for name, r in result["modes"].items():
                sub = r[group][key]
                lines.append(
                    f"| {name} | {sub['n']} | {sub['recall@1']:.3f} | {sub['recall@5']:.3f} "
                    f"| {sub['recall@10']:.3f} | {sub['ndcg@10']:.3f} | {sub['mrr']:.3f} |"
                )
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--modes", nargs="*", default=None, choices=list(MODES))
    p.add_argument("--set", default="", help="JSON of extra query options (QueryParams)")
    p.add_argument("--split", choices=["all", "a", "b"], default="all")
    p.add_argument("--styles", nargs="+", choices=list(STYLES), default=None)
    p.add_argument(
        "--corpus",
        choices=list(CORPORA),
        default="zh",
        help="the set's folder: bench/dialogue/ (zh) or bench/dialogue_<corpus>/",
    )
    p.add_argument(
        "--keywords",
        choices=["written", "tfidf", "none"],
        default="written",
        help="the events' keywords as written, from the package's TF-IDF picker, or none",
    )
    p.add_argument(
        "--without-names",
        action="store_true",
        help="index the events without user_name / agent_name (a caller that does not set them)",
    )
    p.add_argument(
        "--distractors",
        action="store_true",
        help="every scope also holds the other users' Chinese memories of the check, fresh, "
        "hard and implied sets, renamed to the scope's names (not with --corpus zh or "
        "--keywords tfidf)",
    )
    p.add_argument(
        "--variant",
        choices=["auto", "int8", "int8-channel", "fp32"],
        default="auto",
        help="model variant (auto, the package's default: a kept store's own)",
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--prefix", default="bench-q-dialogue")
    p.add_argument("--reuse", action="store_true", help="indices already there: query only")
    p.add_argument("--keep", action="store_true", help="keep the indices afterwards")
    p.add_argument("--out", type=Path, default=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(parser, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
