"""Load on the service surface: N concurrent clients for D seconds, mixed recall and add, on the
synthetic store (default 100k events per database), through

- ``http``: a real ``kemem-es serve`` process, one httpx connection per client over loopback;
- ``async``: AsyncKemem in this process, one task per client on one event loop;
- ``sync``: Kemem in this process, one thread per client.

Reported per run: requests/s, p50/p95/p99 per operation, errors (must be 0) and degraded
answers, and the serving process's RSS before and after. ``--clients 1,2,4,8`` runs each
client count in turn and reports the throughput each tree sustains with its p99 within
``--slo-ms`` (issue 42 counts chat turns per second at p99 ≤ 100 ms). ``--faults`` also
times how long a query takes to answer (degraded) with the engine hung (SIGSTOP), stopped,
and the official index missing.

    python -m bench.load --scale 100000 --clients 16 --duration 60 --out bench/work/load.json
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench import latency, scale
from bench.common import cli_main, drop_indices, make_kemem, percentiles, stamp

AGENT = "a1"
QUERY_OPTS = {"limit": 5}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


class Workload:
    """What each client does next: a query (most) or an add, for a user of the store.

    ``chat`` (what a chat app sends, issue 42): each client is one conversation of one user;
    a turn is a query with the conversation's last ``CHAT_TURNS`` turns as ``context``
    (``chat``), or a ``context()`` call (``context``, a share ``context_share``), or an add
    (dedup on, the default); the agent's reply joins the conversation after each turn.

    ``session`` (the loop docs/sessions.md gives a chat app): each client is one session of one
    user; a turn is a ``context()`` call with the session (``context``: what the user waits
    for), then, after the agent's reply, an add of the user's message and the reply to the
    session (``remember``: the window grows, its vector is prepared, every 10 turns a batch is
    extracted)."""

    def __init__(
        self,
        seed: int,
        add_share: float,
        kind: str = "classic",
        context_share: float = 0.2,
        session: str = "",
    ) -> None:
        self.rng = random.Random(seed)
        self.add_share = add_share
        self.kind = kind
        self.context_share = context_share
        self.texts = scale.queries(500, seed)
        self.events = [r["description"] for b in scale.events(500, seed + 5) for r in b]
        self.user = "u00000" if self.rng.random() < 0.1 else f"u{self.rng.randrange(1, 200):05d}"
        self.turns: list[str] = []
        self.session = session or f"load-{seed}"
        self.pending: list[dict[str, str]] = []  # the turn to remember after the reply

    def next(self) -> tuple[str, dict[str, Any]]:
        if self.kind == "chat":
            return self._chat()
        if self.kind == "session":
            return self._session()
        # one in ten requests for the heavy user (20k memories), the rest for light users
        user = "u00000" if self.rng.random() < 0.1 else f"u{self.rng.randrange(1, 200):05d}"
        if self.rng.random() < self.add_share:
            text = self.rng.choice(self.events)
            return "add", {"text": text, "user_id": user, "agent_id": AGENT}
        return "query", {"query": self.rng.choice(self.texts), "user_id": user, "agent_id": AGENT}

    def _chat(self) -> tuple[str, dict[str, Any]]:
        scope = {"user_id": self.user, "agent_id": AGENT}
        r = self.rng.random()
        if r < self.add_share:
            return "add", {"text": self.rng.choice(self.events), **scope}
        said = self.rng.choice(self.texts)
        context = "\n".join(self.turns[-latency.CHAT_TURNS :])
        reply = latency.AGENT_REPLIES[len(self.turns) % len(latency.AGENT_REPLIES)]
        self.turns += [f"用户：{said}", "助手：" + reply.format(said[-6:])]
        if r < self.add_share + self.context_share:
            return "context", {"message": said, **scope}
        if not context:
            return "query", {"query": said, **scope}
        return "chat", {"query": said, "context": context, **scope}

    def _session(self) -> tuple[str, dict[str, Any]]:
        scope = {"user_id": self.user, "agent_id": AGENT, "session_id": self.session}
        if self.pending:
            messages, self.pending = self.pending, []
            return "remember", {"messages": messages, **scope}
        said = self.rng.choice(self.texts)
        n = len(self.turns)
        reply = latency.AGENT_REPLIES[n % len(latency.AGENT_REPLIES)].format(said[-6:])
        self.turns.append(said)
        self.pending = [
            {"role": "user", "content": said},
            {"role": "assistant", "content": reply},
        ]
        return "context", {"message": said, **scope}


def workload(args: argparse.Namespace, i: int) -> Workload:
    """Client ``i``'s workload; its session (``session``) is new to this run, so a tree never
    continues another run's conversation."""
    session = f"load-{os.getpid()}-{time.time_ns() // 1_000_000}-{i}"
    return Workload(args.seed + i, args.add_share, args.workload, args.context_share, session)


def sessions_counts(km: Any) -> dict[str, float]:
    """The sessions index's counters (none before it exists)."""
    from bench.session_profile import sessions_stats

    try:
        return sessions_stats(km.settings.url, km.settings.index_prefix)
    except Exception:  # no sessions index yet (classic, chat)
        return {}


DROP_TRIES = 5  # deletes of a run's session while its extraction finishes


def drop_sessions(url: str, works: Sequence[Workload]) -> None:
    """Delete the sessions a run wrote (measured already): left idle, the next server's sweep
    would extract them at its start, inside another run's measurement. A session whose batch
    is still being extracted answers 409 (deleting again removes the rest): tried again."""
    import httpx

    for w in works:
        if w.kind != "session" or not w.turns:
            continue
        for attempt in range(DROP_TRIES):
            r = httpx.delete(
                f"{url}/v1/sessions/{w.session}",
                params={"user_id": w.user, "agent_id": AGENT},
                timeout=60,
            )
            if r.status_code != 409:
                r.raise_for_status()
                break
            time.sleep(1.0 + attempt)
        else:
            print(f"load: session {w.session} still busy, left in the store", file=sys.stderr)


def start_delay(args: argparse.Namespace, i: int) -> float:
    """Seconds client ``i`` waits before its first request (``--stagger``): the clients'
    starts spread over one cycle of a client (a think time per request; a session turn is
    two requests), so the first turns come at the pace of the later ones, not as a burst."""
    if not getattr(args, "stagger", False) or not args.think_ms:
        return 0.0
    cycle = args.think_ms / 1000 * (2 if getattr(args, "workload", "") == "session" else 1)
    return float(i * cycle / max(1, args.clients))


def api_call(op: str, body: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """The Python API call that a workload request is: (verb, text, keyword arguments)."""
    kw = dict(body)
    if op in ("query", "chat"):
        return "query", kw.pop("query"), {**kw, **QUERY_OPTS}
    if op == "context":
        return "context", kw.pop("message"), kw
    if op == "remember":
        return "add", kw.pop("messages"), kw
    return "add", kw.pop("text"), kw


PATHS = {
    "query": "/query",
    "chat": "/query",
    "context": "/v1/context",
    "add": "/v1/memories",
    "remember": "/v1/memories",
}
# What the user waits for in each workload: the turns counted against the p99 bound.
TURN_OPS = {"classic": ("query", "add"), "chat": ("query", "chat", "context", "add"),
            "session": ("context",)}  # fmt: skip


class Tally:
    def __init__(self, turn_ops: Sequence[str] = tuple(PATHS)) -> None:
        self.turn_ops = tuple(turn_ops)
        self.ms: dict[str, list[float]] = {op: [] for op in PATHS}
        self.errors: dict[str, int] = {}
        self.degraded = 0
        self.lock = threading.Lock()
        # context answers: (ms the client waited, the answer's timings_ms, the client's turn)
        self.contexts: list[tuple[float, dict[str, float], int]] = []

    def context(self, ms: float, timings: dict[str, float], turn: int) -> None:
        with self.lock:
            self.contexts.append((ms, timings, turn))

    def slow_contexts(self) -> dict[str, Any]:
        """Where the slow contexts' time went: per stage p50/p99 of every context's
        ``timings_ms``, the slowest 1 % (at least 5) with their stages, and what the client
        waited beyond the context's own total (the server's queue, the event loop, the GIL)."""
        if not self.contexts:
            return {}
        stages = sorted({k for _, t, _ in self.contexts for k in t})
        slowest = sorted(self.contexts, key=lambda c: -c[0])[: max(5, len(self.contexts) // 100)]
        outside = [ms - t.get("total", 0.0) for ms, t, _ in self.contexts]
        later = [c for c in self.contexts if c[2] > 1]
        return {
            # a session's first context (a new user: cold caches, and with every client starting
            # at once, the burst of first turns) apart from the rest
            "context_first_ms": percentiles(ms for ms, _, turn in self.contexts if turn <= 1),
            "context_later_ms": percentiles(ms for ms, _, _ in later),
            "context_later_total_ms": percentiles(t.get("total", 0.0) for _, t, _ in later),
            "context_stages_ms": {
                k: percentiles(t.get(k, 0.0) for _, t, _ in self.contexts) for k in stages
            },
            "context_outside_ms": percentiles(outside),
            "context_slowest": [
                {"ms": round(ms, 1), "turn": turn, "outside_ms": round(ms - t.get("total", 0), 1)}
                | {k: round(v, 1) for k, v in t.items()}
                for ms, t, turn in slowest
            ],
        }

    def record(self, op: str, ms: float, error: str | None, degraded: bool = False) -> None:
        with self.lock:
            if error:
                self.errors[error] = self.errors.get(error, 0) + 1
            else:
                self.ms[op].append(ms)
            self.degraded += degraded

    def summary(self, seconds: float) -> dict[str, Any]:
        done = sum(len(v) for v in self.ms.values())
        return {
            "seconds": round(seconds, 1),
            "requests": done + sum(self.errors.values()),
            "rps": round(done / seconds, 1),
            "errors": sum(self.errors.values()),
            "error_kinds": self.errors,
            "degraded": self.degraded,
            **{f"{op}_ms": percentiles(v) for op, v in self.ms.items() if v},
            **{f"{op}_count": len(v) for op, v in self.ms.items() if v},
            "all_ms": percentiles(x for v in self.ms.values() for x in v),
            # the requests a user waits for (TURN_OPS): what the p99 bound applies to
            "turns_per_s": round(sum(len(self.ms[op]) for op in self.turn_ops) / seconds, 1),
            "turn_ms": percentiles(x for op in self.turn_ops for x in self.ms[op]),
            **self.slow_contexts(),
        }


# -- the three ways in ---------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_cpu_ms(pid: int) -> float:
    """CPU ms used so far by a process and its descendants (uvicorn's workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += 1000 * (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{p}/task").iterdir():
                kids = (task / "children").read_text().split()
                todo += [int(k) for k in kids]
        except (OSError, ValueError, IndexError):
            continue
    return total


def run_http(
    km: Any, args: argparse.Namespace, tree: Path | None = None, workers: int = 1
) -> dict[str, Any]:
    import httpx

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEMEM_SERVER_")}
    env.update(
        KEMEM_INDEX_PREFIX=km.settings.index_prefix,
        KEMEM_MODEL_DIR=str(km.settings.model_dir),
        KEMEM_ES_URL=km.settings.url,
        # measuring must not change what is measured, unless the writes a deployment's
        # recalls cause are what is measured (--reinforce)
        KEMEM_REINFORCE="true" if args.reinforce else "false",
        KEMEM_SERVER_DEGRADE="false",  # an engine failure counts as an error here
        KEMEM_SERVER_MAX_INFLIGHT="1024",
    )
    if tree is not None:  # another checkout's server (a before/after run, interleaved)
        env["PYTHONPATH"] = str(tree.resolve())
    cmd = [sys.executable, "-m", "kemem_es.cli.app", "serve", "--port", str(port)]
    cmd += ["--log-level", "warning"]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=str(tree.resolve()) if tree is not None else None,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "serve died")
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("server did not become ready")
            time.sleep(0.2)
        for _ in range(4 * workers):  # every worker warm (the model's first runs)
            httpx.post(
                f"{url}/query", json={"query": "预热", "user_id": "u00001", "agent_id": AGENT}
            )
        before = rss_mb(proc.pid)
        tally = Tally(TURN_OPS[args.workload])
        cpu0, eng0, load0 = tree_cpu_ms(proc.pid), latency.engine_cpu_ms(km), os.getloadavg()
        sess0 = sessions_counts(km)

        sessions: list[Workload] = []

        async def client(i: int, until: float) -> None:
            work = workload(args, i)
            sessions.append(work)
            async with httpx.AsyncClient(base_url=url, timeout=30) as c:
                await asyncio.sleep(start_delay(args, i))
                while time.monotonic() < until:
                    op, body = work.next()
                    path = PATHS[op]
                    if op in ("query", "chat"):
                        body = {**body, **QUERY_OPTS}
                    t0 = time.perf_counter()
                    try:
                        r = await c.post(path, json=body)
                        err = None if r.status_code == 200 else f"HTTP {r.status_code}"
                    except httpx.HTTPError as exc:
                        err = type(exc).__name__
                    ms = (time.perf_counter() - t0) * 1000
                    tally.record(op, ms, err, err is None and "X-Kemem-Degraded" in r.headers)
                    if op == "context" and err is None:
                        tally.context(ms, r.json().get("timings_ms") or {}, len(work.turns))
                    if args.think_ms:
                        await asyncio.sleep(args.think_ms / 1000)

        async def all_clients() -> float:
            t0 = time.perf_counter()
            until = time.monotonic() + args.duration
            await asyncio.gather(*(client(i, until) for i in range(args.clients)))
            return time.perf_counter() - t0

        # The generator's own full collections (its heap holds the store's Kemem: jieba, the
        # lexicon, the model) would stall every client's read and count as the server's
        # latency (3 of up to 53 ms in 30 s at 4 clients): frozen out of its walks first.
        gc.collect()
        gc.freeze()
        seconds = asyncio.run(all_clients())
        out = tally.summary(seconds)
        done = max(1, sum(len(v) for v in tally.ms.values()))
        out.update(
            rss_before_mb=before,
            rss_after_mb=rss_mb(proc.pid),
            process="server",
            workers=workers,
            tree=str(tree) if tree is not None else ".",
            # CPU per answered request: the server's processes and the engine's (the load
            # generator's own is left out); less disturbed by a shared machine than req/s
            server_cpu_ms_per_req=round((tree_cpu_ms(proc.pid) - cpu0) / done, 2),
            engine_cpu_ms_per_req=round((latency.engine_cpu_ms(km) - eng0) / done, 2),
            # the sessions index's own gets and refreshes per turn (session workload)
            sessions_index_per_turn={
                k: round((v - sess0[k]) / max(1, len(tally.ms["context"])), 2)
                for k, v in sessions_counts(km).items()
                if k in sess0
            },
            loadavg_before=[round(x, 1) for x in load0],
            loadavg_after=[round(x, 1) for x in os.getloadavg()],
        )
        drop_sessions(url, sessions)
        return out
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_async(km: Any, args: argparse.Namespace) -> dict[str, Any]:
    from kemem_es import AsyncKemem

    async def go() -> dict[str, Any]:
        async with AsyncKemem(km.settings) as akm:
            akm.core.embedder = km.embedder
            await akm.warm_up()
            await akm.query("预热", user_id="u00001", agent_id=AGENT)
            before = rss_mb(os.getpid())
            tally = Tally(TURN_OPS[args.workload])

            async def client(i: int, until: float) -> None:
                work = workload(args, i)
                while time.monotonic() < until:
                    op, body = work.next()
                    verb, text, kw = api_call(op, body)
                    t0, err = time.perf_counter(), None
                    try:
                        await getattr(akm, verb)(text, **kw)
                    except Exception as exc:  # counted, not raised: the run goes on
                        err = type(exc).__name__
                    tally.record(op, (time.perf_counter() - t0) * 1000, err)
                    if args.think_ms:
                        await asyncio.sleep(args.think_ms / 1000)

            t0 = time.perf_counter()
            until = time.monotonic() + args.duration
            await asyncio.gather(*(client(i, until) for i in range(args.clients)))
            out = tally.summary(time.perf_counter() - t0)
            out.update(rss_before_mb=before, rss_after_mb=rss_mb(os.getpid()))
            out["process"] = "this process (AsyncKemem)"
            return out

    return asyncio.run(go())


def run_sync(km: Any, args: argparse.Namespace) -> dict[str, Any]:
    from kemem_es import Kemem

    skm = Kemem(km.settings)
    skm.embedder = km.embedder
    skm.warm_up()
    skm.query("预热", user_id="u00001", agent_id=AGENT)
    before = rss_mb(os.getpid())
    tally = Tally(TURN_OPS[args.workload])
    until = time.monotonic() + args.duration

    def client(i: int) -> None:
        work = workload(args, i)
        while time.monotonic() < until:
            op, body = work.next()
            verb, text, kw = api_call(op, body)
            t0, err = time.perf_counter(), None
            try:
                getattr(skm, verb)(text, **kw)
            except Exception as exc:  # counted, not raised: the run goes on
                err = type(exc).__name__
            tally.record(op, (time.perf_counter() - t0) * 1000, err)
            if args.think_ms:
                time.sleep(args.think_ms / 1000)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = tally.summary(time.perf_counter() - t0)
    out.update(rss_before_mb=before, rss_after_mb=rss_mb(os.getpid()))
    out["process"] = "this process (Kemem, threads)"
    skm.close()
    return out


RUNNERS: dict[str, Callable[[Any, argparse.Namespace], dict[str, Any]]] = {
    "http": run_http,
    "async": run_async,
    "sync": run_sync,
}


# -- faults ----------------------------------------------------------------------------------
def faults(args: argparse.Namespace) -> dict[str, Any]:
    """Seconds until a degraded answer: engine hung (SIGSTOP of the local node), stopped
    (nothing listening), official events index missing (user memories still answered)."""
    from kemem_es.engine.local import LocalEngine

    km = make_kemem("bench-faults", query_timeout_s=args.deadline)
    drop_indices(km)
    km.init()
    km.add("用户和朋友周末去海边看了日出", user_id="u1", agent_id=AGENT, refresh=True)
    km.add("海边的灯塔每周六开放", agent_id=AGENT, db="official", refresh=True)
    ask = {"user_id": "u1", "agent_id": AGENT, "score_threshold": 0, "degrade": True}
    out: dict[str, Any] = {"deadline_s": args.deadline}

    def timed(k: Any, n: int = 5) -> dict[str, Any]:
        secs, degraded, events = [], 0, 0
        for _ in range(n):
            t0 = time.perf_counter()
            resp = k.query("海边日出", **ask)
            secs.append(time.perf_counter() - t0)
            degraded += bool(resp.additional_info.degraded)
            events += len(resp.memory_events)
        return {"seconds": percentiles(s * 1000 for s in secs), "degraded": degraded, "n": n,
                "events_returned": events}  # fmt: skip

    out["healthy"] = timed(km)
    pid = LocalEngine(km.settings).pid() if not km.settings.es_url else None
    if pid:
        os.kill(pid, signal.SIGSTOP)
        try:
            out["hung_sigstop"] = timed(km)
        finally:
            os.kill(pid, signal.SIGCONT)
    down = make_kemem("bench-faults", es_url="http://127.0.0.1:9", query_timeout_s=args.deadline)
    down.embedder = km.embedder
    out["stopped"] = timed(down)
    for concrete in km.engine.get_index(f"{km.settings.index_prefix}-official-events"):
        km.engine.delete_index(concrete)
    out["official_index_missing"] = timed(km)
    drop_indices(km)
    return out


# -- the run ---------------------------------------------------------------------------------
def parse_tree(spec: str) -> tuple[str, Path, int]:
    """``LABEL=PATH[:WORKERS]`` → (label, checkout, server processes)."""
    label, _, rest = spec.partition("=")
    path, _, workers = rest.partition(":")
    return label, Path(path or "."), int(workers or 1)


def client_counts(spec: str) -> list[int]:
    """``--clients``: one count (``16``) or several (``1,2,4,8``), each run in turn."""
    counts = [int(c) for c in str(spec).split(",") if c.strip()]
    if not counts or min(counts) < 1:
        raise SystemExit(f"--clients: positive counts, comma-separated (got {spec!r})")
    return counts


def tree_summary(rs: list[dict[str, Any]]) -> dict[str, Any]:
    """One tree at one client count, over its rounds (medians)."""

    def med(get: Callable[[dict[str, Any]], float]) -> float:
        return round(float(np.median([get(x) for x in rs])), 2)

    return {
        "rps_median": med(lambda x: x["rps"]),
        "rps": [x["rps"] for x in rs],
        "turns_per_s_median": med(lambda x: x["turns_per_s"]),
        "turn_p50_ms_median": med(lambda x: x["turn_ms"]["p50"]),
        "turn_p99_ms_median": med(lambda x: x["turn_ms"]["p99"]),
        "p99_ms_median": med(lambda x: x["all_ms"]["p99"]),
        "p50_ms_median": med(lambda x: x["all_ms"]["p50"]),
        "server_cpu_ms_per_req_median": med(lambda x: x["server_cpu_ms_per_req"]),
        "engine_cpu_ms_per_req_median": med(lambda x: x["engine_cpu_ms_per_req"]),
        "errors": sum(x["errors"] for x in rs),
    }


def within_slo(summary: dict[str, dict[str, Any]], slo_ms: float) -> dict[str, Any]:
    """Per tree: the most turns per second among its client counts whose turn p99 (median
    over rounds) stayed within ``slo_ms`` with no error (0 when none did), and each tree's
    ratio to the first tree's."""
    best: dict[str, dict[str, Any]] = {}
    for key, sm in summary.items():
        label, _, clients = key.rpartition("@")
        ok = sm["turn_p99_ms_median"] <= slo_ms and sm["errors"] == 0
        cur = best.setdefault(label, {"turns_per_s": 0.0, "clients": None})
        if ok and sm["turns_per_s_median"] > cur["turns_per_s"]:
            best[label] = {
                "turns_per_s": sm["turns_per_s_median"],
                "clients": int(clients),
                "turn_p99_ms": sm["turn_p99_ms_median"],
            }
    first = next(iter(best.values()), {}).get("turns_per_s") or 0.0
    for b in best.values():
        b["x_first"] = round(b["turns_per_s"] / first, 2) if first else None
    return {"slo_ms": slo_ms, "trees": best}


def run_trees(km: Any, args: argparse.Namespace) -> dict[str, Any]:
    """The HTTP load on each tree's server, round-robin for ``--rounds`` rounds (the order
    turned round each round and each client count), on the same store, at each client count:
    before/after in one run. Keys ``LABEL@CLIENTS``."""
    trees = [parse_tree(t) for t in args.tree]
    runs: dict[str, list[dict[str, Any]]] = {}
    for ci, clients in enumerate(client_counts(args.clients)):
        at = argparse.Namespace(**{**vars(args), "clients": clients})
        for r in range(args.rounds):
            for label, path, workers in trees if (ci + r) % 2 == 0 else trees[::-1]:
                print(
                    f"load: http {label} ({path}, {workers} workers, {clients} clients) round {r}",
                    file=sys.stderr,
                )
                res = run_http(km, at, path, workers)
                runs.setdefault(f"{label}@{clients}", []).append(res)
                print(f"  {res}", file=sys.stderr)
    summary = {key: tree_summary(rs) for key, rs in runs.items()}
    return {"runs": runs, "summary": summary, "slo": within_slo(summary, args.slo_ms)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    km = make_kemem(args.prefix.format(n=args.scale), query_timeout_s=30)
    result: dict[str, Any] = {
        "scale": args.scale,
        "clients": args.clients,
        "duration_s": args.duration,
        "add_share": args.add_share,
        "think_ms": args.think_ms,
        "stagger": getattr(args, "stagger", False),
        "query_options": QUERY_OPTS,
        "runs": {},
    }
    if not args.reuse:
        drop_indices(km)
        km.init()
        pool = latency.vector_pool(km, "int8", 7)
        result["indexing"] = latency.load_corpus(km, args.scale, 7, pool)
        result["merge"] = latency.force_merge(km, 1)
    result["workload"] = args.workload
    if args.tree:
        result["trees"] = run_trees(km, args)
    counts = client_counts(args.clients)
    for mode in [] if args.tree else args.modes:
        for clients in counts:
            at = argparse.Namespace(**{**vars(args), "clients": clients})
            key = mode if len(counts) == 1 else f"{mode}@{clients}"
            print(f"load: {mode} ({clients} clients, {args.duration} s)", file=sys.stderr)
            result["runs"][key] = RUNNERS[mode](km, at)
            print(f"  {result['runs'][key]}", file=sys.stderr)
    if args.faults:
        result["faults"] = faults(args)
    result["stamp"] = stamp(km)
    if not args.keep:
        drop_indices(km)
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"## Load ({result['workload']}): {result['clients']} clients × {result['duration_s']} s, "
        f"{result['add_share']:.0%} adds, {result['scale']:,} events per database",
        "",
        "| way in | req/s | query p50 / p95 / p99 ms | add p50 / p99 ms | errors | degraded "
        "| RSS before → after MB |",
        "|---|---|---|---|---|---|---|",
    ]
    if "trees" in result:
        lines += [
            "",
            "| tree@clients | req/s per round | median req/s | turns/s | turn p50 / p99 ms "
            "| all p50 / p99 ms | server CPU ms/req | engine CPU ms/req | errors |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for label, sm in result["trees"]["summary"].items():
            lines.append(
                f"| {label} | {sm['rps']} | {sm['rps_median']} | {sm['turns_per_s_median']} "
                f"| {sm['turn_p50_ms_median']} / {sm['turn_p99_ms_median']} "
                f"| {sm['p50_ms_median']} / {sm['p99_ms_median']} "
                f"| {sm['server_cpu_ms_per_req_median']} "
                f"| {sm['engine_cpu_ms_per_req_median']} | {sm['errors']} |"
            )
        slo = result["trees"].get("slo")
        if slo:
            lines += [
                "",
                f"Turns per second with the turn p99 within {slo['slo_ms']:g} ms "
                "(the best client count):",
                "",
                "| tree | turns/s | clients | turn p99 ms | × the first tree |",
                "|---|---|---|---|---|",
            ]
            for label, b in slo["trees"].items():
                lines.append(
                    f"| {label} | {b['turns_per_s']} | {b['clients']} | {b.get('turn_p99_ms')} "
                    f"| {b['x_first']} |"
                )
    for mode, r in result["runs"].items():
        q, a = r.get("query_ms", {}), r.get("add_ms", {})
        lines.append(
            f"| {mode} | {r['rps']} | {q.get('p50')} / {q.get('p95')} / {q.get('p99')} "
            f"| {a.get('p50')} / {a.get('p99')} | {r['errors']} | {r['degraded']} "
            f"| {r['rss_before_mb']} → {r['rss_after_mb']} |"
        )
    if "faults" in result:
        f = result["faults"]
        lines += [
            "",
            f"## Faults (query deadline {f['deadline_s']} s, degrade on; ms to the answer)",
            "",
            "| case | p50 | max | degraded answers | events returned |",
            "|---|---|---|---|---|",
        ]
        for case in ("healthy", "hung_sigstop", "stopped", "official_index_missing"):
            if case in f:
                c = f[case]
                lines.append(
                    f"| {case} | {c['seconds']['p50']} | {c['seconds']['max']} "
                    f"| {c['degraded']}/{c['n']} | {c['events_returned']} |"
                )
    return "\n".join(lines) + "\n"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=int, default=100_000)
    p.add_argument(
        "--clients", default="16", help="concurrent clients; several (1,2,4,8) run in turn"
    )
    p.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        help="each client's pause after each request (a reply being written, a user typing); "
        "0: the next request at once",
    )
    p.add_argument(
        "--stagger",
        action="store_true",
        help="with --think-ms: client i starts i/N of a client's cycle late (users arriving "
        "spread out, not all at one instant: the first turns' burst otherwise makes the p99)",
    )
    p.add_argument(
        "--slo-ms", type=float, default=100.0, help="the p99 bound a turn's throughput is read at"
    )
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--add-share", type=float, default=0.1)
    p.add_argument("--modes", nargs="+", choices=sorted(RUNNERS), default=["http", "async", "sync"])
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--reuse", action="store_true", help="the store is already loaded")
    p.add_argument("--keep", action="store_true", help="keep the indices afterwards")
    p.add_argument("--faults", action="store_true", help="also time the fault cases")
    p.add_argument("--deadline", type=float, default=1.0, help="query deadline for --faults")
    p.add_argument("--prefix", default="bench-load-{n}", help="index prefix ({n}: the scale)")
    p.add_argument(
        "--workload",
        choices=("classic", "chat", "session"),
        default="classic",
        help="classic: bare queries + adds; chat: chat turns with context, context() calls, "
        "adds; session: context() with a session, then the turn added to it (docs/sessions.md)",
    )
    p.add_argument("--context-share", type=float, default=0.2, help="chat: context() calls")
    p.add_argument(
        "--tree",
        action="append",
        default=[],
        help="LABEL=PATH[:WORKERS]: serve from that checkout (http only), round-robin",
    )
    p.add_argument("--rounds", type=int, default=2, help="with --tree: rounds over the trees")
    p.add_argument(
        "--reinforce",
        action="store_true",
        help="the server reinforces what its queries recall, as deployed (http only; off by "
        "default so that measuring does not change the store)",
    )
    p.add_argument("--out", type=Path, default=None)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return cli_main(parser, run, markdown, argv)


if __name__ == "__main__":
    raise SystemExit(main())
