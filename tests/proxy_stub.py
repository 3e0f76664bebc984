"""A loopback model server speaking OpenAI chat completions and Responses, streaming and not,
for the proxy's tests: it records every request (headers, body), can hold a stream after its
first chunk until released, and can answer an error status instead."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = ["豆包", "最近很好，", "还胖了一点呢。"]  # streamed in these pieces


@dataclass
class Upstream:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail: tuple[int, dict[str, Any]] | None = None  # status and body, for every call
    hold: bool = False  # streams: wait for ``gate`` after the first chunk
    gate: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)  # a stream's last byte
    count: int = 0

    def last(self) -> dict[str, Any]:
        return self.requests[-1]

    def reset(self) -> None:
        self.requests.clear()
        self.fail, self.hold = None, False
        self.gate.clear()
        self.finished.clear()


def _chat(n: int, text: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "stub-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57},
    }


def _chunk(n: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "stub-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _response(n: int, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "id": f"resp_{n}",
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": "stub-model",
        "output": [
            {
                "type": "message",
                "id": f"msg_{n}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 40,
            "output_tokens": 6,
            "total_tokens": 46,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _handler(up: Upstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, status: int, body: Any) -> None:
            data = json.dumps(body, ensure_ascii=False).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _event(self, obj: Any, name: str | None = None) -> None:
            data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
            head = f"event: {name}\n" if name else ""
            payload = f"{head}data: {data}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.loads(raw)
            up.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            up.count += 1
            n = up.count
            if up.fail is not None:
                status, err = up.fail
                # an upstream that quotes the key it got: the proxy must not pass that on
                err = {**err, "echo": self.headers.get("Authorization", "")}
                self._json(status, err)
                return
            responses = self.path.endswith("/responses")
            if not body.get("stream"):
                text = "".join(ANSWER)
                self._json(200, _response(n, text) if responses else _chat(n, text))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                if responses:
                    self._stream_response(n, body)
                else:
                    self._stream_chat(n, body)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                pass
            finally:
                up.finished.set()

        def _wait(self) -> None:
            if up.hold:
                up.gate.wait(20)

        def _stream_chat(self, n: int, body: dict[str, Any]) -> None:
            self._event(_chunk(n, {"role": "assistant", "content": ANSWER[0]}))
            self._wait()
            for piece in ANSWER[1:]:
                self._event(_chunk(n, {"content": piece}))
            self._event(_chunk(n, {}, "stop"))
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = {**_chunk(n, {}), "choices": []}
                usage["usage"] = {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}
                self._event(usage)
            self._event("[DONE]")

        def _stream_response(self, n: int, body: dict[str, Any]) -> None:
            seq = iter(range(100))
            created = _response(n, "", "in_progress")
            created["output"] = []
            self._event({"type": "response.created", "response": created,
                         "sequence_number": next(seq)}, "response.created")  # fmt: skip
            for i, piece in enumerate(ANSWER):
                self._event(
                    {"type": "response.output_text.delta", "item_id": f"msg_{n}",
                     "output_index": 0, "content_index": 0, "delta": piece, "logprobs": [],
                     "sequence_number": next(seq)},
                    "response.output_text.delta",
                )  # fmt: skip
                if i == 0:
                    self._wait()
            done = _response(n, "".join(ANSWER))
            self._event({"type": "response.completed", "response": done,
                         "sequence_number": next(seq)}, "response.completed")  # fmt: skip

    return Handler


@contextmanager
def serve_upstream() -> Iterator[Upstream]:
    up = Upstream()
    from support import free_port

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _handler(up))
    server.daemon_threads = True
    up.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield up
    finally:
        up.gate.set()
        server.shutdown()
        server.server_close()


MEMORY = "木木养了一只叫豆包的柯基，每天早上带它去公园散步"  # agent_a's memory of u1


@contextmanager
def memory_store(settings: Any, embedder: Any) -> Iterator[Any]:
    """A Kemem on a fresh test prefix holding :data:`MEMORY` for (agent_a, u1); dropped after."""
    import uuid

    from support import drop_prefix

    from kemem_es import Kemem

    km = Kemem(settings.model_copy(update={"index_prefix": f"test-{uuid.uuid4().hex[:8]}"}))
    km.embedder = embedder
    km.init()
    km.add(MEMORY, user_id="u1", agent_id="agent_a", refresh=True)
    try:
        yield km
    finally:
        drop_prefix(km)


def proxy_env(store: Any, up: Upstream, keys: dict[str, list[str]], **extra: str) -> dict[str, str]:
    """``kemem-es serve``'s environment: ``store``'s engine and prefix, these API keys, ``up``
    as the upstream (key ``sk-upstream`` unless given), agent_a the default agent."""
    from support import cli_env

    settings = {
        "KEMEM_SERVER_API_KEYS": json.dumps(keys),
        "KEMEM_PROXY_UPSTREAM_URL": up.url,
        "KEMEM_PROXY_UPSTREAM_KEY": "sk-upstream",
        "KEMEM_DEFAULT_AGENT_ID": "agent_a",
        **extra,
    }
    return cli_env(store, **settings)
