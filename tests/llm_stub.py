"""A loopback server speaking the OpenAI chat-completions protocol, for the extractor tests:
it records each request and answers with fixed JSON, a status, or nothing for a while."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def chat(content: Any, finish: str = "stop") -> dict[str, Any]:
    """A chat-completions response body with one choice."""
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "model": "stub-model",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish,
            }
        ],
    }


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list → JSON; str/bytes as is
    delay: float = 0.0
    trickle: float = 0.0  # > 0: send the body one byte at a time, this many seconds apart


@dataclass
class Stub:
    url: str = ""
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    # Set: each 200 answer's content is built from the request body (answers as JSON).
    responder: Callable[[dict[str, Any]], Any] | None = None

    def answer(self, *replies: Reply) -> None:
        """Answer with these in order; the last one repeats."""
        self.replies = list(replies)

    def answer_json(self, obj: Any) -> None:
        self.answer(Reply(body=chat(json.dumps(obj, ensure_ascii=False))))

    def next_reply(self) -> Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            stub.requests.append(
                {"path": self.path, "headers": dict(self.headers), "body": json.loads(raw)}
            )
            reply = stub.next_reply()
            if stub.responder is not None and reply.status == 200 and not reply.delay:
                out = stub.responder(stub.requests[-1]["body"])
                text = out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)
                reply = Reply(body=chat(text))
            if reply.delay:
                stub.release.wait(reply.delay)
            body = reply.body
            if isinstance(body, dict | list):
                body = json.dumps(body, ensure_ascii=False)
            data = body.encode() if isinstance(body, str) else (body or b"")
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if not reply.trickle:
                    self.wfile.write(data)
                for i in range(len(data) if reply.trickle else 0):
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                    if stub.release.wait(reply.trickle):
                        break
            except OSError:  # the client gave up (the timeout tests)
                pass

    return Handler


@contextmanager
def serve_stub(first_answer: Any) -> Iterator[Stub]:
    """A chat-completions server on 127.0.0.1 (port 0) answering ``first_answer`` as JSON."""
    s = Stub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(s))
    server.daemon_threads = True
    s.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    s.answer_json(first_answer)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield s
    finally:
        s.release.set()
        server.shutdown()
        server.server_close()
