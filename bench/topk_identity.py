"""Same top-10s from two trees: a refactor that claims "no logic change" answers every dev-set
query with the same ids and scores as the tree before it.

    python -m bench.topk_identity index  --prefix bench-topk [--queries 200]
    python -m bench.topk_identity record --prefix bench-topk --out a.json [--queries 200]
    python -m bench.topk_identity compare a.json b.json
    python -m bench.topk_identity drop   --prefix bench-topk

``index`` writes the dialogue dev set's corpus (bench/dialogue: the demo corpus and the extra
events, as ``bench.dialogue_eval`` indexes it) and the MemDaily documents of the users the
sampled queries ask about (per user, as ``bench.memdaily`` indexes them; the shared dev copy
../shared/data/dev/memdaily, or ``--memdaily``) under one prefix. ``record`` asks the first N
dialogue queries (short and long sets) and N MemDaily queries (``bench.memdaily.sample``,
seed 0) with
the harnesses' own options (limit 10, threshold 0, no reinforcement) and writes each answer's
event and entity ids with their scores. Run ``record`` once per tree, each in its own process
with that tree first on ``PYTHONPATH`` (``git archive REV | tar -x -C DIR``), on the same index;
``compare`` counts the queries whose top-10s (ids, order, scores) are identical.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.common import drop_indices, make_kemem

MEMDAILY = Path(__file__).resolve().parents[2] / "shared" / "data" / "dev" / "memdaily"


def _sets(n: int, data: Path) -> tuple[list[dict[str, Any]], Any, list[dict[str, Any]]]:
    from bench.dialogue_eval import load_queries
    from bench.evalset import EvalSet
    from bench.memdaily import sample

    dialogue = load_queries(styles=("recall", "situational", "long"))[:n]
    memdaily = EvalSet.load(data)
    return dialogue, memdaily, sample(memdaily.queries, n)


def index(args: argparse.Namespace) -> None:
    from bench.dialogue_eval import index_corpus
    from bench.memdaily import build_records, embeddings, index_all

    km = make_kemem(args.prefix)
    drop_indices(km)
    km.init()
    print("dialogue corpus:", index_corpus(km), file=sys.stderr)
    _, es, queries = _sets(args.queries, args.memdaily)
    users = {q["namespace"] for q in queries}
    docs = [d for d in es.docs if d["namespace"] in users]
    es.docs = docs
    vecs = embeddings(km, [d["text"] for d in docs], "int8")
    per_user, _ = build_records(km, es, vecs, "tfidf", set())
    print("memdaily:", index_all(km, per_user, f"{len(users)} users"), file=sys.stderr)
    km.close()


def _hits(resp: Any) -> dict[str, list[list[Any]]]:
    return {
        "events": [[h.index, h.score] for h in resp.memory_events],
        "entities": [[h.index, h.score] for h in resp.memory_entities],
    }


def record(args: argparse.Namespace) -> None:
    from bench import dialogue_eval, memdaily

    km = make_kemem(args.prefix)
    dialogue, _, queries = _sets(args.queries, args.memdaily)
    out: dict[str, Any] = {"dialogue": {}, "memdaily": {}}
    for q in dialogue:
        out["dialogue"][q["qid"]] = _hits(dialogue_eval.ask(km, q))
    for q in queries:
        out["memdaily"][q["qid"]] = _hits(memdaily.ask(km, q, pooled=False))
    km.close()
    import kemem_es

    out["tree"] = str(Path(kemem_es.__file__).resolve().parent.parent)
    Path(args.out).write_text(json.dumps(out, ensure_ascii=False, indent=0))
    sizes = {k: len(v) for k, v in out.items() if isinstance(v, dict)}
    print(f"recorded {sizes} from {out['tree']}", file=sys.stderr)


def compare(args: argparse.Namespace) -> int:
    a, b = (json.loads(Path(p).read_text()) for p in (args.a, args.b))
    differ = 0
    for name in ("dialogue", "memdaily"):
        qa, qb = a[name], b[name]
        same = [q for q in qa if qa[q] == qb.get(q)]
        ids = [q for q in qa if qb.get(q) and _ids(qa[q]) == _ids(qb[q])]
        missing = set(qa) ^ set(qb)
        differ += len(qa) - len(same) + len(missing)
        print(
            f"{name}: {len(same)}/{len(qa)} identical (ids, order and scores), "
            f"{len(ids)}/{len(qa)} identical ids and order, {len(missing)} asked by one tree only"
        )
    return 1 if differ else 0


def _ids(hits: dict[str, list[list[Any]]]) -> dict[str, list[str]]:
    return {k: [h[0] for h in v] for k, v in hits.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.topk_identity", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("index", "record", "drop"):
        s = sub.add_parser(name)
        s.add_argument("--prefix", default="bench-topk")
        s.add_argument("--queries", type=int, default=200)
        s.add_argument("--memdaily", type=Path, default=MEMDAILY, help="the MemDaily dev copy")
        if name == "record":
            s.add_argument("--out", required=True)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    args = p.parse_args(argv)
    if args.cmd == "index":
        index(args)
    elif args.cmd == "record":
        record(args)
    elif args.cmd == "drop":
        drop_indices(make_kemem(args.prefix))
    else:
        return compare(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
