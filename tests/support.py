"""Helpers several test modules share: a real ``kemem-es serve`` process, and dropping a test
index prefix."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_process(env: dict[str, str], up_within_s: float = 60) -> Iterator[str]:
    """``kemem-es serve`` on a free loopback port with ``env``; yields its URL once /healthz
    answers, and stops it afterwards."""
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
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def drop_prefix(km: Any) -> None:
    """Delete every index and template of ``km``'s (test) prefix."""
    prefix = km.settings.index_prefix
    for name in km.engine.client.indices.get(index=f"{prefix}-*"):
        km.engine.delete_index(name)
    for kind in ("events", "entities"):
        for db in ("user", "official"):
            with contextlib.suppress(Exception):
                km.engine.client.indices.delete_index_template(name=f"{prefix}-{db}-{kind}")
