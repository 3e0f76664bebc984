"""Helpers several test modules share: a real ``kemem-es serve`` process, and dropping a test
index prefix (after closing the in-process servers' AsyncKemem instances)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest


def free_port() -> int:
    """A free loopback port: one of KEMEM_TEST_PORTS ("8801-8819") when set, so that runs
    sharing a machine keep to their own ports; else any the system gives."""
    low, _, high = os.environ.get("KEMEM_TEST_PORTS", "0").partition("-")
    for port in range(int(low), int(high or low) + 1):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError(f"no free port in KEMEM_TEST_PORTS={low}-{high}")


@contextlib.contextmanager
def serve_process(env: dict[str, str], up_within_s: float = 60) -> Iterator[str]:
    """``kemem-es serve`` on a free loopback port with ``env``; yields its URL once /healthz
    answers, and stops it afterwards."""
    with serving(env, up_within_s) as (url, _):
        yield url


@contextlib.contextmanager
def serving(
    env: dict[str, str], up_within_s: float = 60
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """:func:`serve_process`, yielding the process too (to signal it and read its output)."""
    import httpx

    port = free_port()
    cmd = [sys.executable, "-m", "kemem_es.cli.app", "serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + up_within_s
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            pytest.fail(f"kemem-es serve did not come up in {up_within_s:g} s")
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


class HangingProxy:
    """A TCP proxy on a loopback port to the engine at ``target`` (a URL). After :meth:`hang`
    it swallows every byte both ways, on open connections and new ones: an engine that stopped
    answering while its port stays open (SIGSTOP, a full GC, a network that drops)."""

    def __init__(self, target: str) -> None:
        parts = urllib.parse.urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 9200)
        self.hung = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", free_port()))
        self._listener.listen()
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def hang(self) -> None:
        self.hung.set()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(self.target)
            except OSError:
                return
            self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if not self.hung.is_set():
                    dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.close()

    def __enter__(self) -> HangingProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()


# The in-process server tests' AsyncKemem instances, each with the event loop it runs on. Their
# last reinforcement flush needs that loop and writes to the test's indices, so they are closed
# before a prefix is dropped, not left to warn at exit that their queue was lost.
_OPEN: list[tuple[asyncio.AbstractEventLoop, Any]] = []


def opened(loop: asyncio.AbstractEventLoop, akm: Any) -> None:
    """Close ``akm`` on ``loop`` (then the loop) before the next prefix is dropped."""
    _OPEN.append((loop, akm))


def close_opened() -> None:
    while _OPEN:
        loop, akm = _OPEN.pop()
        try:
            loop.run_until_complete(akm.aclose())
        finally:
            loop.close()


def stored_events(km: Any, records: list[dict[str, Any]], init: bool = True) -> None:
    """``records`` written as the user's event memories (after ``init``), searchable now."""
    if init:
        km.init()
    km.index_records(records, "events")
    km.engine.client.indices.refresh(index=f"{km.settings.index_prefix}-*")


def drop_prefix(km: Any) -> None:
    """Delete every index and template of ``km``'s (test) prefix, after closing ``km`` and the
    AsyncKemem instances the test opened: their last flush (reinforcement, users' activity)
    writes there, and left for exit it would find the indices, or the node, gone."""
    close_opened()
    km.close()
    prefix = km.settings.index_prefix
    for name in km.engine.client.indices.get(index=f"{prefix}-*"):
        km.engine.delete_index(name)
    for kind in ("events", "entities"):
        for db in ("user", "official"):
            with contextlib.suppress(Exception):
                km.engine.client.indices.delete_index_template(name=f"{prefix}-{db}-{kind}")


# The demo corpus under several layouts (shards, nodes): the answers to compare.
DEMO_NOW = datetime(2025, 6, 1, 12)
DEMO_QUERIES = [
    ("室友失恋了，我们陪她吃了一晚上火锅", "u_mumu", "qiyu"),
    ("最近总是失眠，晚上睡不着", "u_mumu", "qiyu"),
    ("海边写生看日落", "u_mumu", "lishen"),
    ("下周就是我的生日了，你会送我什么", "u_xiaoman", "lishen"),
    ("加班到十一点，好累啊", "u_chengcheng", "qiyu"),
]


def demo_store(settings: Any, embedder: Any, tag: str, **update: Any) -> Any:
    """A Kemem on a fresh ``test-<tag>-`` prefix holding the demo corpus; ``update``: settings
    such as ``user_shards``. Recalls do not reinforce, so scores can be compared."""
    from kemem_es import Kemem
    from kemem_es.kemem import DEMO_FILES, demo_path

    prefix = f"test-{tag}-{uuid.uuid4().hex[:8]}"
    km = Kemem(settings.model_copy(update={"index_prefix": prefix, "reinforce": False, **update}))
    km.embedder = embedder
    km.init()
    for name, kind, db in DEMO_FILES:
        km.index_file(demo_path(name), kind, db)
    km.engine.refresh(f"{prefix}-*")
    return km


def demo_answers(km: Any) -> list[dict[str, list]]:
    """Events and entities (contract form) of the demo queries."""
    out = []
    for text, user, agent in DEMO_QUERIES:
        resp = km.query(text, user_id=user, agent_id=agent, now=DEMO_NOW, score_threshold=0.0,
                        limit=8)  # fmt: skip
        contract = resp.to_contract()
        out.append({k: contract[k] for k in ("memory_events", "memory_entities")})
    return out


def assert_scoped(answers: list[dict[str, list]]) -> None:
    """Every event belongs to the asking user (or is official) for the asking agent."""
    for (_, user, agent), answer in zip(DEMO_QUERIES, answers, strict=True):
        for event in answer["memory_events"]:
            assert event["index"].startswith((f"ev-{user}-{agent}-", f"ev-official-{agent}-"))


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``kemem-es ARGS`` as a real process (what a shell runs), output captured."""
    return subprocess.run(
        [sys.executable, "-m", "kemem_es.cli.app", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def cli_env(km: Any, **extra: str) -> dict[str, str]:
    """The environment that points the CLI at ``km``'s engine, prefix and model."""
    return dict(
        os.environ,
        KEMEM_INDEX_PREFIX=km.settings.index_prefix,
        KEMEM_MODEL_DIR=str(km.settings.model_dir),
        KEMEM_ES_URL=km.settings.url,
        **extra,
    )
