"""Import rate, before vs after, on one machine in one run: where an import's time goes.

Three imports of a fresh slice (``--docs``, default 5,000), each on a fresh index prefix:

- ``vectors``: events with their vectors supplied (no embedding);
- ``int8``: events embedded by the int8 model;
- ``entities``: entities with a slot (where each lives), vectors supplied, into a store that
  holds ``docs / 2`` older facts of the same subjects: half the import supersedes one.

Each (stage, tree) runs in its own process, with the tree's ``kemem_es`` first on PYTHONPATH;
the trees take turns (A B, then B A) run by run, so a busy machine weighs on both alike. A run
records its wall time, its own CPU and the engine's (from /proc), the load average before and
after, and per part of the import (validation, body building, embedding, JSON, engine round
trips by kind, refresh, history writes, supersession) the wall and CPU seconds it took, from
wrappers around those functions (nested parts are inside their parents; the sender threads'
parts overlap the main thread's).

    python -m bench.index_rate --tree before=/path/to/base --tree after=. --runs 3
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
STAGES = ("vectors", "int8", "entities")
CITIES = ["北京", "上海", "广州", "深圳", "杭州", "成都", "南京", "西安", "武汉", "重庆"]
SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾萧田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤"  # noqa: E501
GIVEN = "伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英华玉兰萍红鹏飞辉宇晨浩然欣怡梓涵子轩雨萱思远嘉怡俊杰雅琳文博诗涵一鸣若曦木木晓峰"  # noqa: E501


# -- the worker: one import, instrumented ------------------------------------------------------
class Parts:
    """Wall and thread-CPU seconds per named part, from every thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, owner: Any, attr: str, name: str | Any) -> None:
        """Time ``owner.attr`` (a function of a module or class) as ``name`` (or
        ``name(args)`` when it is a callable naming each call)."""
        fn = getattr(owner, attr, None)
        if fn is None:  # a part the tree does not have
            return

        @functools.wraps(fn)
        def timed(*args: Any, **kw: Any) -> Any:
            label = name(*args, **kw) if callable(name) else name
            w0, c0 = time.perf_counter(), time.thread_time()
            try:
                return fn(*args, **kw)
            finally:
                dw, dc = time.perf_counter() - w0, time.thread_time() - c0
                with self.lock:
                    self.wall[label] += dw
                    self.cpu[label] += dc
                    self.calls[label] += 1

        setattr(owner, attr, timed)

    def table(self) -> dict[str, dict[str, float]]:
        out = {}
        for k in sorted(self.wall, key=lambda k: -self.wall[k]):
            out[k] = {"wall_s": round(self.wall[k], 3), "cpu_s": round(self.cpu[k], 3)}
            out[k]["calls"] = self.calls[k]
        return out


def _request_kind(self: Any, method: str, path: str, **kw: Any) -> str:
    """An engine round trip by what it is for."""
    body = kw.get("body")
    if path.endswith("/_bulk"):
        first = next(iter(body[0].values()), {}) if body else {}
        index = str(first.get("_index", ""))
        if index.endswith("-history"):
            return "engine: bulk history"
        if "update" in body[0] or ("if_seq_no" in first and len(body) == 2):
            return "engine: bulk marks/patches"
        return "engine: bulk memories"
    for tail, label in (("_mget", "engine: mget"), ("_msearch", "engine: msearch"),
                        ("_refresh", "engine: refresh"), ("_search", "engine: search"),
                        ("_count", "engine: count")):  # fmt: skip
        if tail in path:
            return label
    return f"engine: {method} other"


def instrument() -> Parts:
    import kemem_es.memory.service.supersession as sup
    import kemem_es.memory.writes as writes
    import kemem_es.store.bulk as bulk
    import kemem_es.store.bulk.prepare as prepare
    import kemem_es.store.bulk.send as send
    import kemem_es.store.history as history
    from kemem_es.engine.client import Engine
    from kemem_es.engine.serialize import FastJSONSerializer
    from kemem_es.store.crud import Crud
    from kemem_es.store.facts import Facts

    p = Parts()
    p.wrap(writes, "validate_items", "client: validation (pydantic, scope, vector checks)")
    p.wrap(bulk.BulkWriter, "_prepare", "client: prepare batches (existence mget + embed + body)")
    p.wrap(prepare.BulkPrepare, "vectors", "client: embed (vectors given: copy)")
    p.wrap(prepare, "to_document", "client: body building (to_document, tokenise)")
    p.wrap(prepare, "content_hash", "client: content hash")
    p.wrap(send.BulkSend, "_send", "client: send batch (bulk + history, sender threads)")
    p.wrap(history, "write", "client: history write (incl. round trip)")
    p.wrap(FastJSONSerializer, "dumps", "client: JSON dumps")
    p.wrap(FastJSONSerializer, "loads", "client: JSON loads")
    p.wrap(Engine, "request", _request_kind)
    p.wrap(sup.Supersession, "supersede_imported", "supersession: total")
    p.wrap(Facts, "slot_holders", "supersession: slot holders (msearch)")
    p.wrap(sup.Supersession, "mark_superseded", "supersession: one mark (fetch + write + hist)")
    p.wrap(Crud, "refresh", "refresh (supersession)")
    try:
        import kemem_es.store.bulk.marks as marks

        p.wrap(marks, "read_versions", "supersession: read versions (mget)")
        p.wrap(marks, "write_marks", "supersession: write marks + history (2 bulks)")
    except ImportError:
        pass
    return p


def engine_cpu_ms(km: Any) -> float:
    """CPU milliseconds of the local engine's process (from /proc)."""
    info = km.engine.client.nodes.info(metric="process")["nodes"].values()
    total = 0.0
    for node in info:
        stat = Path(f"/proc/{node['process']['id']}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        total += 1000 * (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _vectors(pool: Any, n: int, seed: int) -> list[list[float]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    vecs = pool[rng.integers(0, len(pool), n)]
    vecs = vecs + rng.normal(0, 0.01, vecs.shape).astype(np.float32)
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    return [[float(x) for x in v] for v in vecs.round(6)]


def _name(i: int) -> str:
    """A distinct name for every ``i`` up to len(SURNAMES) × len(given)²."""
    given = "".join(dict.fromkeys(GIVEN))
    s, g = len(SURNAMES), len(given)
    return SURNAMES[i % s] + given[(i // s) % g] + given[(i // (s * g)) % g]


def entity_slice(
    n: int, vectors: list[list[float]], users: int = 50
) -> tuple[list[dict], list[dict]]:
    """(n/2 older facts, n newer ones): the first half of the newer ones moves a subject of an
    older fact elsewhere (supersedes it), the second half is about subjects not seen before."""
    half = n // 2
    names = [_name(i) for i in range(n + half)]
    assert len(set(names)) == len(names), "subject names must be unique"

    def rec(i: int, subject: int, text: str, when: str) -> dict[str, Any]:
        """Record ``i`` about subject ``subject`` (its user follows the subject: an older and
        a newer fact of one subject are in one scope)."""
        return {
            "id": f"en-{i:06d}", "entity_name": names[subject], "entity_type": "客体",
            "kind": "用户属性", "description": f"{names[subject]}{text}", "updatetime": when,
            "agent_id": "a1", "user_id": f"u{subject % users:03d}", "vector": vectors[i],
        }  # fmt: skip

    old = [rec(i, i, f"住在{CITIES[i % 10]}", "2024-01-01 10:00:00") for i in range(half)]
    new = [rec(half + i, i, f"搬到{CITIES[(i + 3) % 10]}了", "2025-06-01 10:00:00")
           for i in range(half)]  # fmt: skip
    new += [
        rec(half + i, i, f"住在{CITIES[i % 10]}", "2025-06-01 10:00:00") for i in range(half, n)
    ]
    return old, new


def worker(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    from bench import scale
    from bench.common import drop_indices, make_kemem

    stage, n = args.stage, args.docs
    km = make_kemem(args.prefix, variant="int8")
    drop_indices(km)
    km.init()
    km.embedder.embed(["预热"])  # the model and jieba loaded outside the timed part
    km.tokenizer.index_text("预热")
    pool = np.load(args.pool)
    kind = "entities" if stage == "entities" else "events"
    if stage == "entities":
        old, records = entity_slice(n, _vectors(pool, n + n // 2, 17), args.users)
        km.index_records(old, kind="entities", db="user")  # untimed: the store before
    else:
        records = [r for b in scale.events(n, 12, "user", 0, args.users) for r in b]
        if stage == "vectors":
            for r, v in zip(records, _vectors(pool, n, 13), strict=True):
                r["vector"] = v
    parts = instrument()
    load0 = os.getloadavg()
    c0, e0, t0 = time.process_time(), engine_cpu_ms(km), time.perf_counter()
    rep = km.index_records(records, kind=kind, db="user")
    secs = time.perf_counter() - t0
    client_s, engine_ms = time.process_time() - c0, engine_cpu_ms(km) - e0
    load1 = os.getloadavg()
    written = rep.indexed + rep.updated
    out = {
        "stage": stage, "docs": n, "users": args.users, "written": written,
        "superseded": rep.superseded,
        "seconds": round(secs, 3), "docs_per_s": round(n / secs, 1),
        "client_cpu_ms_per_doc": round(1000 * client_s / n, 4),
        "engine_cpu_ms_per_doc": round(engine_ms / n, 4),
        "load_before": [round(x, 2) for x in load0], "load_after": [round(x, 2) for x in load1],
        "parts": parts.table(),
    }  # fmt: skip
    drop_indices(km)
    km.close()
    return out


# -- the orchestrator ---------------------------------------------------------------------------
def make_pool(path: Path) -> None:
    """Real int8 embeddings of generated texts (vectors supplied are realistic ones)."""
    if path.exists():
        return
    import numpy as np

    from bench import scale
    from bench.common import make_kemem

    km = make_kemem("bench-idx-pool", variant="int8")
    texts = [r["description"] for b in scale.events(1024, 99) for r in b]
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, km.embedder.embed(texts).astype(np.float32))


def run_one(
    tree: str, stage: str, docs: int, prefix: str, pool: Path, users: int
) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": tree}
    cmd = [sys.executable, str(HERE), "--worker", "--stage", stage, "--docs", str(docs),
           "--prefix", prefix, "--pool", str(pool), "--users", str(users)]  # fmt: skip
    done = subprocess.run(cmd, env=env, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{tree} {stage} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", help="name=path (a checkout's root)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--docs", type=int, default=5000)
    ap.add_argument("--stages", default=",".join(STAGES))
    ap.add_argument("--users", type=int, default=50, help="users the records are spread over")
    ap.add_argument("--out", help="write every run's JSON here")
    ap.add_argument("--pool", default=str(HERE.parent / "work" / "index-rate-pool.npy"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--stage", help=argparse.SUPPRESS)
    ap.add_argument("--prefix", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args), ensure_ascii=False))
        return
    trees = dict(t.split("=", 1) for t in args.tree or [f"after={HERE.parent.parent}"])
    pool = Path(args.pool)
    make_pool(pool)
    runs: list[dict[str, Any]] = []
    names = list(trees)
    for r in range(args.runs):
        order = names if r % 2 == 0 else names[::-1]
        for stage in args.stages.split(","):
            for name in order:
                prefix = f"bench-idx-{stage}-{name}"
                tree = os.path.abspath(trees[name])
                res = run_one(tree, stage, args.docs, prefix, pool, args.users)
                res |= {"tree": name, "run": r}
                runs.append(res)
                print(
                    f"run {r} {stage:8s} {name:7s} {res['docs_per_s']:8.1f} docs/s "
                    f"client {res['client_cpu_ms_per_doc']:.3f} engine "
                    f"{res['engine_cpu_ms_per_doc']:.3f} ms/doc load {res['load_before'][0]}"
                    f"→{res['load_after'][0]} superseded {res['superseded']}",
                    file=sys.stderr,
                    flush=True,
                )
    if args.out:
        Path(args.out).write_text(json.dumps(runs, ensure_ascii=False, indent=1))
    print(markdown(runs, names))


def markdown(runs: list[dict[str, Any]], names: list[str]) -> str:
    lines = ["| stage | tree | median docs/s | client CPU ms/doc | engine CPU ms/doc | "
             "load (1 min) | runs |", "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    med: dict[tuple[str, str], float] = {}
    for stage in dict.fromkeys(r["stage"] for r in runs):
        for name in names:
            rs = [r for r in runs if r["stage"] == stage and r["tree"] == name]
            if not rs:
                continue
            m = statistics.median(r["docs_per_s"] for r in rs)
            med[(stage, name)] = m
            loads = [r["load_before"][0] for r in rs]
            lines.append(
                f"| {stage} | {name} | {m:.0f} | "
                f"{statistics.median(r['client_cpu_ms_per_doc'] for r in rs):.3f} | "
                f"{statistics.median(r['engine_cpu_ms_per_doc'] for r in rs):.3f} | "
                f"{min(loads):.2f}–{max(loads):.2f} | {len(rs)} |"
            )
    if len(names) == 2:
        lines.append("")
        for stage in dict.fromkeys(r["stage"] for r in runs):
            a, b = med.get((stage, names[1])), med.get((stage, names[0]))
            if a and b:
                lines.append(f"- {stage}: {names[1]}/{names[0]} = {a / b:.2f}×")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
