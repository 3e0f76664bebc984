"""Native against script scoring (or one engine against another): the same queries on two
configurations, every event and entity answer compared by id, order and unrounded score.

    python scripts/scoring_compare.py --a http://127.0.0.1:9235,script \
        --b http://127.0.0.1:9235,native [--b http://127.0.0.1:9287,native ...] \
        [--prefix kemem] [--paths exact,approx] [--modes fusion,two_stage,bm25,vector] \
        [--tolerance 1e-5] [--sets demo,dialogue,check,fresh,hard,en,entities,facts,memdaily] \
        [--memdaily-queries 300] [--reuse] [--keep]

Each side is ``URL,SCORING`` (scoring: native, script or auto); every ``--b`` is compared with
``--a``. Set ``demo`` (the default) asks the demo utterances of a store the caller loaded under
``--prefix`` (e.g. ``kemem-es demo`` on each side). Every other set is a dev set that this script
loads itself, once per engine URL, under ``bench-sc-<set>`` (dropped afterwards unless
``--keep``; ``--reuse``: ask a kept store) and asks as its eval does (the last turn, the earlier
turns as context, the set's ``now``, limit 10, threshold 0): ``dialogue`` (bench/dialogue: the
demo corpus + extras, short and long sets), ``check``, ``fresh``, ``hard``, ``en`` (the other
bench/dialogue_* sets), ``entities`` (bench/entities, zh and en), ``facts`` (bench/facts: each
scenario's memories imported into a scope of its own; its question and past question) and
``memdaily`` (a per-user subset of ../shared/data/dev/memdaily: ``--memdaily-queries`` queries
and their users' memories). Reinforcement is off, so a query does not change what the next one
scores. Prints the largest score difference per set, mode and path, each side's p50 engine round
trip, and exits 1 when an answer differs (other ids, other order, or a score beyond the
tolerance; equal scores within the tolerance may come in either order).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kemem_es.contract.params import QueryParams
from kemem_es.kemem import Kemem

PAIRS = [
    ("u_mumu", "qiyu"),
    ("u_mumu", "lishen"),
    ("u_xiaoman", "lishen"),
    ("u_chengcheng", "qiyu"),
]
UTTERANCES = [
    "室友失恋了，我们陪她吃了一晚上火锅",
    "最近总是失眠，晚上睡不着",
    "海边写生看日落",
    "she painted the sunset by the sea again",
    "最近胃不舒服，是不是又吃太辣了",
    "下周就是我的生日了，你会送我什么",
    "今天去看了演唱会，嗓子都喊哑了",
    "我想学画画，但总觉得自己没天赋",
    "猫咪今天不肯吃饭，有点担心",
    "加班到十一点，好累啊",
    "你还记得我们第一次见面吗",
    "春节回家被亲戚催婚了",
    "下雨天最适合喝一杯热咖啡",
    "考试没考好，心情很差",
    "周末想去海边走走。顺便拍点照片，晚上再吃顿海鲜",
]
NOW = datetime(2025, 6, 1, 12, 0, 0)
ROOT = Path(__file__).resolve().parent.parent
MEMDAILY = ROOT.parent / "shared" / "data" / "dev" / "memdaily"
# the dev sets of bench/dialogue_eval.py: --sets name -> its --corpus
DIALOGUE_SETS = {"dialogue": "zh", "check": "check", "fresh": "fresh", "hard": "hard", "en": "en"}
SETS = ("demo", *DIALOGUE_SETS, "entities", "facts", "memdaily")

# one query: (label, text, km.query keyword arguments other than mode and path)
Query = tuple[str, str, dict[str, Any]]


class Side:
    """One configuration: a Kemem whose searcher records the unrounded ranked answers."""

    def __init__(self, spec: str, prefix: str) -> None:
        url, scoring = spec.rsplit(",", 1)
        self.name, self.url = spec, url
        self.km = Kemem(es_url=url, scoring=scoring, index_prefix=prefix, reinforce=False)
        self.last: dict[str, Any] = {}
        self.times: list[float] = []
        searcher = self.km.searcher
        rank_events, score_entities = searcher.rank_events, searcher.score_entities
        msearch = searcher.engine.msearch

        def ranked(*a: Any, **kw: Any) -> Any:
            out = rank_events(*a, **kw)
            self.last["events"] = [(h["_id"], score) for _, h, score, _ in out[0]]
            return out

        def entities(*a: Any, **kw: Any) -> Any:
            out = score_entities(*a, **kw)
            self.last["entities"] = [(h["_id"], score) for h, score in out]
            return out

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return msearch(*a, **kw)
            finally:
                self.times.append((time.perf_counter() - t0) * 1000)

        searcher.rank_events = ranked  # type: ignore[method-assign]
        searcher.score_entities = entities  # type: ignore[method-assign]
        searcher.engine.msearch = timed  # type: ignore[method-assign]
        self.scoring = searcher.engine.dialect.scoring

    def answer(self, text: str, params: QueryParams) -> dict[str, Any]:
        self.last = {"events": [], "entities": []}
        self.km.searcher.query(text, params)
        return self.last

    def ask(self, text: str, options: dict[str, Any]) -> dict[str, Any]:
        """One query through the public API (context, now, ... as a dev set asks it)."""
        self.last = {"events": [], "entities": []}
        q = dict(options)
        self.km.query(text, user_id=q.pop("user_id"), agent_id=q.pop("agent_id"), **q)
        return self.last


def compare(
    a: list[tuple[str, float]], b: list[tuple[str, float]], tol: float
) -> tuple[bool, float]:
    """(same ids in the same order within the tolerance, largest score difference)."""
    diff = max((abs(x[1] - y[1]) for x, y in zip(a, b, strict=False)), default=0.0)
    same_ids = [x[0] for x in a] == [y[0] for y in b]
    if not same_ids:
        # equal scores (ties within the tolerance) may come in either order
        sa = sorted(a, key=lambda r: (round(-r[1] / tol), r[0]))
        sb = sorted(b, key=lambda r: (round(-r[1] / tol), r[0]))
        same_ids = [x[0] for x in sa] == [y[0] for y in sb]
        if same_ids:  # the same memories: the difference of each one's own score
            db = dict(b)
            diff = max((abs(s - db[i]) for i, s in a), default=0.0)
    return same_ids and diff <= tol, diff


# -- the dev sets: how each is loaded into a store, and what is asked ---------------------------
def _turns(q: dict[str, Any]) -> tuple[str, str]:
    turns = q["turns"]
    return turns[-1]["text"], "\n".join(f"{t['speaker']}：{t['text']}" for t in turns[:-1])


def dialogue_set(corpus: str) -> tuple[Callable[[Kemem], Any], list[Query]]:
    from bench import dialogue_eval as de

    queries = []
    for q in de.load_queries("all", de.CORPUS_STYLES[corpus], corpus):
        text, context = _turns(q)
        now = datetime.fromisoformat(q["now"])
        opts = dict(user_id=q["user_id"], agent_id=q["agent_id"], context=context, now=now,
                    limit=10, score_threshold=0.0)  # fmt: skip
        queries.append((q["qid"], text, opts))
    return (lambda km: de.index_corpus(km, corpus)), queries


def entities_set() -> tuple[Callable[[Kemem], Any], list[Query]]:
    from bench import entity_eval as ee

    queries = []
    for corpus in ("zh", "en"):
        for q in ee.load_queries(corpus):
            text, context = _turns(q)
            opts = dict(user_id=q["user_id"], agent_id=q["agent_id"], context=context,
                        now=ee.NOW, limit=10, score_threshold=0.0)  # fmt: skip
            queries.append((q["qid"], text, opts))
    return (lambda km: ee.index_corpus(km, ["zh", "en"])), queries


def facts_set() -> tuple[Callable[[Kemem], Any], list[Query]]:
    """Each scenario's distractors, old fact and new fact imported as events of a scope of its
    own (the old fact dated 2025-03-01, the new one 2025-09-01, the rest 2025-06-01: no dedup,
    no supersession, so every engine holds the same memories); its question and its question
    about the past."""
    from bench.facts import evaluate as fe

    scenarios = fe.load("scenarios.jsonl")

    def load(km: Kemem) -> Any:
        from kemem_es import EventRecord

        km.init()
        recs = []
        for s in scenarios:
            user = f"facts-{s['id']}"
            rows = [(f"{s['id']}-d{i}", d, "2025-06-01") for i, d in enumerate(s["distractors"])]
            rows += [(f"{s['id']}-old", s["old"], "2025-03-01")]
            rows += [(f"{s['id']}-new", s["new"], "2025-09-01")]
            recs += [
                EventRecord(
                    id=i,
                    user_id=user,
                    agent_id=fe.AGENT,
                    description=text,
                    created_at=datetime.fromisoformat(f"{day}T10:00:00"),
                )
                for i, text, day in rows
            ]
        return km.index_records(recs, kind="events", db="user").indexed

    queries = []
    for s in scenarios:
        opts = dict(user_id=f"facts-{s['id']}", agent_id=fe.AGENT, now=datetime(2025, 10, 1, 12),
                    limit=10, score_threshold=0.0, entity_threshold=0.0)  # fmt: skip
        queries += [(s["id"], s["question"], opts), (s["id"] + "-past", s["past_question"], opts)]
    return load, queries


def memdaily_set(n: int) -> tuple[Callable[[Kemem], Any], list[Query]]:
    """``n`` MemDaily queries (seeded sample) and every memory of their users, each user a
    scope of its own (the per-namespace setting of bench/memdaily.py)."""
    from bench import memdaily as md
    from bench.evalset import EvalSet

    es = EvalSet.load(MEMDAILY)
    qs = md.sample(es.queries, n)
    users = {q["namespace"] for q in qs}
    docs = [d for d in es.docs if d["namespace"] in users]

    def load(km: Kemem) -> Any:
        km.init()
        vecs = md.embeddings(km, [d["text"] for d in docs], "fp32")
        per_ns, _ = md.build_records(km, dataclasses.replace(es, docs=docs), vecs, "tfidf", set())
        return md.index_all(km, per_ns, "memdaily per-user")

    queries = [
        (
            q["qid"],
            q["text"],
            dict(
                user_id=q["namespace"],
                agent_id=md.AGENT,
                limit=10,
                score_threshold=0.0,
                entity_limit=0,
                now=datetime.fromisoformat(q["timestamp"]),
            ),
        )
        for q in qs
    ]
    return load, queries


def dev_set(name: str, args: argparse.Namespace) -> tuple[Callable[[Kemem], Any], list[Query]]:
    if name in DIALOGUE_SETS:
        return dialogue_set(DIALOGUE_SETS[name])
    if name == "entities":
        return entities_set()
    if name == "facts":
        return facts_set()
    if name == "memdaily":
        return memdaily_set(args.memdaily_queries)
    raise SystemExit(f"unknown set {name!r}: one of {', '.join(SETS)}")


def demo_queries() -> list[Query]:
    return [
        (
            f"{user}/{agent} {text}",
            text,
            dict(user_id=user, agent_id=agent, now=NOW, limit=8, score_threshold=0.0),
        )
        for user, agent in PAIRS
        for text in UTTERANCES
    ]


@contextlib.contextmanager
def stores(
    sides: list[Side], load: Callable[[Kemem], Any] | None, reuse: bool, keep: bool
) -> Iterator[None]:
    """The set's store on each engine (one load per URL): loaded now unless ``reuse``, dropped
    afterwards unless ``keep`` or ``reuse``."""
    from bench.common import drop_indices

    owners = list({s.url: s for s in sides}.values())
    if load is not None and not reuse:
        for side in owners:
            drop_indices(side.km)
            t0 = time.perf_counter()
            n = load(side.km)
            side.km.engine.client.indices.refresh(index=f"{side.km.settings.index_prefix}-*")
            print(f"  loaded {side.url}: {n} in {time.perf_counter() - t0:.1f} s")
    try:
        yield
    finally:
        if load is not None and not keep and not reuse:
            for side in owners:
                drop_indices(side.km)


def run_set(
    name: str, specs: tuple[str, list[str]], args: argparse.Namespace
) -> tuple[int, dict[str, Any]]:
    """(answers that differ, the set's figures) for one set on every pair (A, B)."""
    if name == "demo":
        load, queries, prefix = None, demo_queries(), args.prefix
    else:
        load, queries = dev_set(name, args)
        prefix = f"bench-sc-{name}"
    a = Side(specs[0], prefix)
    bs = [Side(spec, prefix) for spec in specs[1]]
    print(f"== {name}: {len(queries)} queries; A {a.name} (scoring {a.scoring}); "
          + "; ".join(f"B {b.name} (scoring {b.scoring})" for b in bs))  # fmt: skip
    figures: dict[str, Any] = {"queries": len(queries), "pairs": {}}
    failures = 0
    with stores([a, *bs], load, args.reuse, args.keep):
        for mode in args.modes.split(","):
            for path in args.paths.split(","):
                worst = [0.0] * len(bs)
                bad = [0] * len(bs)
                n = 0
                for label, text, opts in queries:
                    o = {**opts, "mode": mode, "path": path}
                    ra = a.answer(text, QueryParams(**o)) if name == "demo" else a.ask(text, o)
                    for j, b in enumerate(bs):
                        rb = b.answer(text, QueryParams(**o)) if name == "demo" else b.ask(text, o)
                        for what in ("events", "entities"):
                            ok, diff = compare(ra[what], rb[what], args.tolerance)
                            worst[j] = max(worst[j], diff)
                            if not ok:
                                bad[j] += 1
                                print(f"  DIFF {b.name} {mode}/{path} {what} {label}: {text}")
                                print(f"    A {[(i, round(s, 6)) for i, s in ra[what]]}")
                                print(f"    B {[(i, round(s, 6)) for i, s in rb[what]]}")
                    n += 2
                for j, b in enumerate(bs):
                    failures += bad[j]
                    key = f"{mode}/{path}"
                    figures["pairs"].setdefault(b.name, {})[key] = {
                        "answers": n,
                        "differ": bad[j],
                        "max_abs_diff": worst[j],
                    }
                    print(f"  {name:9s} {mode:9s} {path:6s} B={b.name}: {n} answers, "
                          f"{bad[j]} differ, max |score diff| {worst[j]:.2e}")  # fmt: skip
    figures["p50_ms"] = {}
    for side in (a, *bs):
        t = side.times or [0.0]
        figures["p50_ms"][side.name] = round(statistics.median(t), 1)
        print(f"  {side.name}: engine round trip p50 {statistics.median(t):.1f} ms "
              f"({len(side.times)} calls)")  # fmt: skip
    return failures, figures


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="URL,SCORING")
    ap.add_argument("--b", required=True, action="append", help="URL,SCORING (repeatable)")
    ap.add_argument("--prefix", default="kemem", help="the demo set's store")
    ap.add_argument("--sets", default="demo", help=f"comma-separated: {', '.join(SETS)}")
    ap.add_argument("--paths", default="exact,approx")
    ap.add_argument("--modes", default="fusion,two_stage,bm25,vector")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    ap.add_argument("--memdaily-queries", type=int, default=300)
    ap.add_argument("--reuse", action="store_true", help="ask the dev sets' kept stores")
    ap.add_argument("--keep", action="store_true", help="keep the dev sets' stores")
    ap.add_argument("--out", type=Path, default=None, help="the figures as JSON")
    args = ap.parse_args()
    failures = 0
    out: dict[str, Any] = {"a": args.a, "b": args.b, "tolerance": args.tolerance, "sets": {}}
    for name in args.sets.split(","):
        bad, figures = run_set(name, (args.a, args.b), args)
        failures += bad
        out["sets"][name] = figures
        if args.out:
            args.out.write_text(json.dumps(out, indent=1, default=str), encoding="utf-8")
    print(f"{failures} answers differ")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
