"""A quick check that one local engine version installs, starts and answers, and (optionally)
answers the demo queries exactly as another node does.

    python scripts/engine_check.py --engine-version 2.19 --home /tmp/k219 --port 9253 \
        --compare-port 9251

Starts a node of that version on its own home and port (nothing else is touched), indexes the
bundled demo corpus under its own index prefix, runs a few queries, prints the node's status
and stops the node again. With --compare-port (or --compare-url) the same corpus is indexed on
that node too and every result and score must be identical (the fused score of 2.19 and 3.x
must not differ). The check's indices are deleted afterwards on both nodes.

    python scripts/engine_check.py --engine elasticsearch --engine-version 9.5 \
        --home /tmp/kes --port 9288 --compare-port 9251

checks the Elasticsearch development node (native scoring: it has no Painless) against an
OpenSearch node (script scoring): the CLI's answers must name the same memories in the same
order with the same fields, their scores (rounded to 4 decimals by the CLI) at most one unit of
the last decimal apart, and scripts/scoring_compare.py then compares the unrounded scores of
every demo query (fusion, both paths) within 1e-5.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
QUERIES = [
    ("室友失恋了，我们陪她吃了一晚上火锅", "u_mumu", "qiyu"),
    ("最近总是失眠，晚上睡不着", "u_mumu", "qiyu"),
    ("海边写生看日落", "u_mumu", "lishen"),
    # latin script: the English profile, its term-proximity (intervals) clauses on both engines
    ("she painted the sunset by the sea again", "u_mumu", "lishen"),
]
NOW = "2025-06-01T12:00:00"


def cli(args: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "kemem_es.cli.app", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"`kemem-es {' '.join(args)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def answers(env: dict[str, str]) -> list[dict]:
    """The demo queries' events and entities (timings left out), as the CLI gives them."""
    out = []
    for text, user, agent in QUERIES:
        args = ["query", text, "--user", user, "--agent", agent, "--now", NOW]
        raw = cli([*args, "--limit", "8", "--threshold", "0", "--json"], env)
        resp = json.loads(raw)
        out.append({k: resp[k] for k in ("memory_events", "memory_entities")})
    return out


def within_rounding(mine: list[dict], theirs: list[dict]) -> tuple[list[dict], list[dict]]:
    """Both answers with each score taken from ``theirs`` where the two are at most one unit of
    the CLI's last decimal apart (native and script scores differ by ~3e-6, which can flip a
    rounding); anything else is left to differ."""
    out = []
    for m, t in zip(mine, theirs, strict=True):
        m = json.loads(json.dumps(m))
        for key in ("memory_events", "memory_entities"):
            for a, b in zip(m[key], t[key], strict=False):
                sa, sb = a.get("score"), b.get("score")
                if isinstance(sa, float) and isinstance(sb, float) and abs(sa - sb) <= 1.01e-4:
                    a["score"] = sb
        out.append(m)
    return out, theirs


def unrounded(script_url: str, native_url: str, prefix: str, env: dict[str, str]) -> None:
    """scripts/scoring_compare.py between the two nodes: unrounded scores within 1e-5."""
    cmd = [
        sys.executable, str(REPO / "scripts/scoring_compare.py"),
        "--a", f"{script_url},auto", "--b", f"{native_url},auto", "--prefix", prefix,
        "--modes", "fusion", "--paths", "exact,approx",
    ]  # fmt: skip
    proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    print(proc.stdout.strip())
    if proc.returncode != 0:
        sys.exit(f"unrounded scores differ between {native_url} and {script_url}: {proc.stderr}")


def delete_indices(url: str, prefix: str) -> None:
    """The check's indices and index templates (nothing else: the names carry its prefix).
    Indices by name: Elasticsearch refuses a wildcard delete (destructive_requires_name)."""
    try:
        with urllib.request.urlopen(f"{url}/{prefix}-*?filter_path=*.settings.index.uuid") as r:
            names = sorted(json.loads(r.read().decode() or "{}"))
    except (OSError, ValueError) as exc:
        print(f"(could not list the indices {prefix}-* on {url}: {exc})")
        names = []
    for path in (*names, f"_index_template/{prefix}-*"):
        req = urllib.request.Request(f"{url}/{path}", method="DELETE")
        try:
            urllib.request.urlopen(req, timeout=30).read()
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                print(f"(could not delete {path} on {url}: {exc})")
        except OSError as exc:
            print(f"(could not delete {path} on {url}: {exc})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", default="opensearch", choices=["opensearch", "elasticsearch"])
    ap.add_argument(
        "--engine-version", default="2.19", choices=["2.19", "3.5", "8.18", "9.5", "auto"]
    )
    ap.add_argument("--home", required=True, help="a KEMEM_HOME of this check's own")
    ap.add_argument("--port", type=int, required=True, help="HTTP port of the checked node")
    ap.add_argument("--compare-port", type=int, help="a running local node to compare with")
    ap.add_argument("--compare-url", help="a running cluster to compare with")
    ap.add_argument("--prefix", default="kemem-check", help="index prefix used on both nodes")
    args = ap.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith("KEMEM_ES_")}
    if os.environ.get("KEMEM_ES_TIMEOUT_S"):  # not a cluster of its own: a slow machine's
        env["KEMEM_ES_TIMEOUT_S"] = os.environ["KEMEM_ES_TIMEOUT_S"]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    shared_model = REPO.parent / "shared/models/m3e-small-onnx"  # as scripts/setup.sh does
    if not env.get("KEMEM_MODEL_DIR") and not env.get("KEMEM_MODEL") and shared_model.is_dir():
        env["KEMEM_MODEL_DIR"] = str(shared_model)
    env.update(
        KEMEM_HOME=args.home,
        KEMEM_ENGINE_PORT=str(args.port),
        KEMEM_ENGINE=args.engine,
        KEMEM_ENGINE_VERSION=args.engine_version,
        KEMEM_INDEX_PREFIX=args.prefix,
        # A comparison of scores: the queries must not reinforce what the next one scores.
        KEMEM_REINFORCE="false",
    )
    url = f"http://127.0.0.1:{args.port}"
    compare = args.compare_url or (
        f"http://127.0.0.1:{args.compare_port}" if args.compare_port else None
    )
    t0 = time.monotonic()
    try:
        print(cli(["engine", "start"], env).strip())
        print(f"started in {time.monotonic() - t0:.0f} s")
        print(cli(["engine", "status"], env).strip().split("\n┏")[0])
        node_env = {**env, "KEMEM_ES_URL": url}
        print(cli(["demo"], node_env).strip().splitlines()[-1])
        mine = answers(node_env)
        hits = sum(len(a["memory_events"]) for a in mine)
        if hits == 0:
            sys.exit("the demo queries found no events")
        print(f"{len(QUERIES)} demo queries answered, {hits} events")
        if compare:
            other_env = {**env, "KEMEM_ES_URL": compare}
            try:
                cli(["demo"], other_env)
                theirs = answers(other_env)
                if args.engine == "elasticsearch":
                    unrounded(compare, url, args.prefix, env)
            finally:
                delete_indices(compare, args.prefix)
            if args.engine == "elasticsearch":
                mine, theirs = within_rounding(mine, theirs)
            if mine != theirs:
                for m, t in zip(mine, theirs, strict=True):
                    for a, b in zip(m["memory_events"], t["memory_events"], strict=False):
                        if a != b:
                            print(
                                f"  {a.get('index')} {a.get('score')} | {b.get('index')} "
                                f"{b.get('score')}"
                            )
                sys.exit(f"results differ between {url} and {compare}")
            print(f"identical results and scores on {url} and {compare}")
    finally:
        delete_indices(url, args.prefix)
        print(cli(["engine", "stop"], env).strip())
    print(f"engine check ({args.engine_version}) passed in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
