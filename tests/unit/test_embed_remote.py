"""The remote embedder against a loopback OpenAI-compatible ``/v1/embeddings`` stub: a good
service, a slow one (the deadline), one failing with 500 (retried within the deadline, then a
clear error), one answering the wrong dimension (a clear error, nothing written)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from kemem_es.config import get_settings
from kemem_es.embed import EmbedderError, load_embedder
from kemem_es.embed.remote import RemoteEmbedder
from kemem_es.errors import KememError

DIM = 8


def vector(text: str, dim: int = DIM) -> list[float]:
    """A deterministic vector per text (its sha256 bytes), not normalised."""
    digest = hashlib.sha256(text.encode()).digest()
    return [digest[i] / 255.0 - 0.5 for i in range(dim)]


@dataclass
class Service:
    url: str = ""
    mode: str = "good"  # good | slow | fail | fail_once | dim | garbage
    dim: int = DIM
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


def _handler(svc: Service) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            svc.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            status, dim = 200, svc.dim
            if svc.mode == "slow":
                svc.release.wait(5)
            if svc.mode == "fail" or (svc.mode == "fail_once" and len(svc.requests) == 1):
                status = 500
            if svc.mode == "dim" and len(svc.requests) > 1:
                dim = svc.dim + 4  # the probe answers right, later calls do not
            if status != 200:
                out: Any = {"error": {"message": "model overloaded"}}
            elif svc.mode == "garbage":
                out = {"nothing": True}
            else:
                data = [
                    {"object": "embedding", "index": i, "embedding": vector(t, dim)}
                    for i, t in enumerate(body["input"])
                ]
                out = {"object": "list", "data": data[::-1], "model": body["model"]}
            raw = json.dumps(out).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except OSError:
                pass

    return Handler


@contextmanager
def service(mode: str = "good") -> Iterator[Service]:
    svc = Service(mode=mode)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(svc))
    server.daemon_threads = True
    svc.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield svc
    finally:
        svc.release.set()
        server.shutdown()
        server.server_close()


def test_good_service_batches_keeps_order_normalises_and_prefixes() -> None:
    with service() as svc:
        emb = RemoteEmbedder(
            svc.url, "bge-m3", api_key="sk-test", batch_size=3, query_prefix="query: ",
            document_prefix="passage: ",
        )  # fmt: skip
        assert emb.dim == DIM  # probed once
        texts = [f"记忆 {i}" for i in range(7)]
        got = emb.embed(texts)
        assert got.shape == (7, DIM) and got.dtype == np.float32
        assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
        want = np.asarray([vector("passage: " + t) for t in texts], dtype=np.float32)
        want /= np.linalg.norm(want, axis=1, keepdims=True)
        assert np.allclose(got, want, atol=1e-6)  # the answer's order by index, not as sent
        calls = [r["body"] for r in svc.requests[1:]]
        assert [len(c["input"]) for c in calls] == [3, 3, 1]
        assert all(c["model"] == "bge-m3" for c in calls)
        assert svc.requests[1]["path"] == "/v1/embeddings"
        assert svc.requests[1]["headers"]["Authorization"] == "Bearer sk-test"
        q = emb.embed_query("你好吗")
        assert svc.requests[-1]["body"]["input"] == ["query: 你好吗"]
        assert q.shape == (DIM,)
        assert "sk-test" not in repr(emb) and "bge-m3 @ 127.0.0.1" in emb.name


def test_settings_choose_the_remote_embedder() -> None:
    with service() as svc:
        s = get_settings(embed_url=svc.url, embed_model="m", embed_dim=DIM, embed_batch=2)
        emb = load_embedder(s)
        assert isinstance(emb, RemoteEmbedder) and emb.dim == DIM
        assert load_embedder(s) is emb
        assert svc.requests == []  # the dimension was given: no probe


def test_slow_service_is_cut_at_the_deadline() -> None:
    with service("slow") as svc:
        emb = RemoteEmbedder(svc.url, "m", dim=DIM, timeout_s=0.5)
        t0 = time.monotonic()
        with pytest.raises(EmbedderError, match=r"did not answer within 0\.5 s") as err:
            emb.embed(["a", "b"])
        assert time.monotonic() - t0 < 2.0
        assert isinstance(err.value, KememError)


def test_500_is_retried_within_the_deadline_then_a_clear_error() -> None:
    with service("fail_once") as svc:
        emb = RemoteEmbedder(svc.url, "m", dim=DIM, timeout_s=5)
        assert emb.embed(["a"]).shape == (1, DIM)
        assert len(svc.requests) == 2
    with service("fail") as svc:
        emb = RemoteEmbedder(svc.url, "m", dim=DIM, timeout_s=1.0)
        t0 = time.monotonic()
        with pytest.raises(EmbedderError, match=r"HTTP 500\): model overloaded"):
            emb.embed(["a"])
        assert time.monotonic() - t0 < 2.5
        assert len(svc.requests) >= 2  # tried again while the deadline allowed


def test_wrong_dimension_is_a_clear_error() -> None:
    with service("dim") as svc:
        emb = RemoteEmbedder(svc.url, "m")  # probed: 8
        with pytest.raises(EmbedderError, match="12-dimensional vectors, but the model's dim"):
            emb.embed(["a"])
    with service() as svc:
        emb = RemoteEmbedder(svc.url, "m", dim=512)  # configured, but the service gives 8
        with pytest.raises(EmbedderError, match="8-dimensional"):
            emb.embed(["a"])


def test_bad_answers_and_settings_are_clear_errors() -> None:
    with service("garbage") as svc, pytest.raises(EmbedderError, match="OpenAI-style body"):
        RemoteEmbedder(svc.url, "m", dim=DIM).embed(["a"])
    with pytest.raises(EmbedderError, match="KEMEM_EMBED_URL"):
        RemoteEmbedder("ftp://x", "m", dim=DIM)
    with pytest.raises(EmbedderError, match="KEMEM_EMBED_MODEL"):
        RemoteEmbedder("http://127.0.0.1:9/v1", "", dim=DIM)
    with pytest.raises(EmbedderError, match="could not reach"):  # nothing listens on port 9
        RemoteEmbedder("http://127.0.0.1:9/v1", "m", dim=DIM, timeout_s=0.5).embed(["a"])
