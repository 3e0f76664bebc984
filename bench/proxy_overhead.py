"""What the OpenAI-compatible proxy adds to a chat call: p50/p99 of the same chat-completions
request sent straight to a loopback upstream stub and through ``kemem-es serve`` (memory on:
context() recall + injection + the turn stored afterwards; and memory off: forwarding alone).

    python bench/proxy_overhead.py --requests 200

Needs the local engine (KEMEM_* as for the tests) and the [server] extra. It indexes a few
memories on a fresh ``bench-proxy-*`` prefix and drops it afterwards. Sequential requests, one
client: the numbers are per-request latency, not throughput.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from proxy_stub import serve_upstream  # noqa: E402
from support import cli_env, drop_prefix, free_port  # noqa: E402

from kemem_es import Kemem  # noqa: E402
from kemem_es.config import get_settings  # noqa: E402

MEMORIES = [
    "木木养了一只叫豆包的柯基，每天早上带它去公园散步",
    "木木在一家设计公司上班，最近经常加班到十一点",
    "木木的外婆住在杭州，每年春节都回去看她",
    "木木喜欢吃麻辣烫，不吃香菜",
    "木木上个月开始学游泳，已经能游二十五米了",
]
TURNS = [
    "豆包最近怎么样？",
    "今天又加班了，好累",
    "外婆最近身体还好吗",
    "晚上吃什么呢",
    "游泳有进步吗",
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(client: httpx.Client, url: str, body: dict, headers: dict) -> float:
    start = time.perf_counter()
    r = client.post(url, json=body, headers=headers)
    elapsed = (time.perf_counter() - start) * 1000
    r.raise_for_status()
    return elapsed


@contextlib.contextmanager
def serve(env: dict[str, str]) -> Iterator[str]:
    """``kemem-es serve`` with its log in a file (a pipe nobody reads would fill and stall it
    after a few hundred request lines)."""
    port = free_port()
    cmd = [sys.executable, "-m", "kemem_es.cli.app", "serve", "--port", str(port),
           "--log-level", "warning"]  # fmt: skip
    with tempfile.TemporaryFile() as logfile:
        proc = subprocess.Popen(cmd, env=env, stdout=logfile, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            for _ in range(600):
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.5)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()

    km = Kemem(
        get_settings().model_copy(update={"index_prefix": f"bench-proxy-{uuid.uuid4().hex[:8]}"})
    )
    km.init()
    for text in MEMORIES:
        km.add(text, user_id="u1", agent_id="agent_a", refresh=True)
    results: dict[str, list[float]] = {"direct": [], "proxy_memory_off": [], "proxy_memory_on": []}
    try:
        with serve_upstream() as up:
            env = cli_env(km, KEMEM_PROXY_UPSTREAM_URL=up.url, KEMEM_DEFAULT_AGENT_ID="agent_a")
            with serve(env) as url, httpx.Client(timeout=60) as c:
                scope = {"X-Kemem-User-Id": "u1", "X-Kemem-Session-Id": "bench"}
                for i in range(args.warmup + args.requests):
                    msgs = [{"role": "system", "content": "你是小狸。"},
                            {"role": "user", "content": TURNS[i % len(TURNS)]}]  # fmt: skip
                    body = {"model": "stub-model", "messages": msgs}
                    off = {**body, "memory_config": {"enable_memory": False}}
                    runs = (
                        ("direct", f"{up.url}/chat/completions", body, {}),
                        ("proxy_memory_off", f"{url}/v1/chat/completions", off, scope),
                        ("proxy_memory_on", f"{url}/v1/chat/completions", body, scope),
                    )
                    for name, target, payload, headers in runs:
                        ms = timed(c, target, payload, headers)
                        if i >= args.warmup:
                            results[name].append(ms)
                injected = sum("小狸。\n\n" in r["body"]["messages"][0]["content"]
                               for r in up.requests)  # fmt: skip
    finally:
        drop_prefix(km)
    out = {
        name: {"p50_ms": round(pct(v, 0.5), 2), "p99_ms": round(pct(v, 0.99), 2),
               "mean_ms": round(statistics.fmean(v), 2)}
        for name, v in results.items()
    }  # fmt: skip
    for mode in ("proxy_memory_off", "proxy_memory_on"):
        diffs = [p - d for p, d in zip(results[mode], results["direct"], strict=True)]
        out[f"overhead_{mode}"] = {
            "p50_ms": round(pct(diffs, 0.5), 2),
            "p99_ms": round(pct(diffs, 0.99), 2),
        }
    out["requests"] = args.requests
    out["memory_injected_in"] = injected
    out["load_average"] = os.getloadavg()[0]
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
