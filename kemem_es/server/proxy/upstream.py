"""The upstream side: the call to ``KEMEM_PROXY_UPSTREAM_URL`` (its key never shown), its
errors passed through, a stream relayed chunk by chunk, and what the answer says (text, token
usage, the response id) read for the usage count, the chain and the stored turn."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import Request, Response
from fastapi.responses import JSONResponse, StreamingResponse

from kemem_es.server.errors import ApiError
from kemem_es.server.proxy.memory import (
    Turn,
    count_usage,
    remember_response,
    store_turn,
    text_of,
)
from kemem_es.server.proxy.models import MemoryInfo
from kemem_es.server.proxy.state import state

log = logging.getLogger("kemem_es.server.proxy")

MEMORY_INFO_HEADER = "X-Kemem-Memory-Info"
Kind = Literal["chat", "responses"]


def _secret(request: Request) -> str | None:
    key = request.app.state.settings.proxy_upstream_key
    return key.get_secret_value() if key is not None else None


def scrub(data: bytes, secret: str | None) -> bytes:
    """``data`` without the upstream key (an upstream may quote the header it got)."""
    if secret and secret.encode() in data:
        data = data.replace(secret.encode(), b"***")
    return data


def _upstream(request: Request) -> str:
    url = request.app.state.settings.proxy_upstream_url
    if not url:
        raise ApiError(
            503,
            "proxy_not_configured",
            "this server has no upstream model: set KEMEM_PROXY_UPSTREAM_URL",
        )
    return str(url).rstrip("/")


def _client(request: Request) -> Any:
    import httpx

    st = state(request)
    if st.client is None:
        timeout = request.app.state.settings.proxy_timeout_s
        st.client = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=10.0))
    return st.client


def _info_header(info: MemoryInfo) -> str:
    return json.dumps(info.model_dump(exclude_none=True), ensure_ascii=True)


async def _error_passthrough(resp: Any, secret: str | None) -> Response:
    data = scrub(await resp.aread(), secret)
    ctype = resp.headers.get("content-type", "application/json")
    headers = {k: v for k, v in resp.headers.items() if k.lower() in ("retry-after",)}
    return Response(data, status_code=resp.status_code, media_type=ctype, headers=headers)


async def _send(request: Request, path: str, body: dict[str, Any]) -> Any:
    """The upstream call, streamed (the caller reads or relays it); 502/504 when it fails."""
    import httpx

    secret = _secret(request)
    headers = {"Content-Type": "application/json", "Accept": request.headers.get("accept", "*/*")}
    if secret:
        headers["Authorization"] = f"Bearer {secret}"
    client = _client(request)
    req = client.build_request("POST", _upstream(request) + path, json=body, headers=headers)
    try:
        return await client.send(req, stream=True)
    except httpx.TimeoutException:
        raise ApiError(
            504, "upstream_timeout", "the upstream model did not answer in time"
        ) from None
    except httpx.HTTPError as exc:
        log.warning("proxy: upstream unreachable: %s", type(exc).__name__)
        raise ApiError(502, "upstream_unavailable", "the upstream model is unreachable") from None


def sse_events(buffer: bytearray) -> list[dict[str, Any]]:
    """Complete SSE ``data:`` JSON events taken off the front of ``buffer``."""
    out: list[dict[str, Any]] = []
    while (end := buffer.find(b"\n\n")) >= 0:
        block = bytes(buffer[:end]).decode("utf-8", "replace")
        del buffer[: end + 2]
        for line in block.splitlines():
            data = line[5:].strip() if line.startswith("data:") else ""
            if not data or data == "[DONE]":
                continue
            try:
                obj = json.loads(data)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


@dataclass
class Collected:
    """What a stream said, gathered event by event."""

    text: list[str] = field(default_factory=list)
    prompt: int = 0
    completion: int = 0
    response_id: str | None = None

    def see(self, kind: Kind, event: dict[str, Any]) -> None:
        if kind == "chat":
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                if choice.get("index", 0) == 0 and isinstance(delta.get("content"), str):
                    self.text.append(delta["content"])
            usage = event.get("usage") or {}
            self.prompt = usage.get("prompt_tokens", self.prompt) or self.prompt
            self.completion = usage.get("completion_tokens", self.completion) or self.completion
            return
        etype = event.get("type", "")
        if etype == "response.output_text.delta" and isinstance(event.get("delta"), str):
            self.text.append(event["delta"])
        elif etype in ("response.completed", "response.created"):
            resp = event.get("response") or {}
            self.response_id = resp.get("id") or self.response_id
            if etype == "response.completed":
                usage = resp.get("usage") or {}
                self.prompt = usage.get("input_tokens", 0) or 0
                self.completion = usage.get("output_tokens", 0) or 0


def _after(request: Request, turn: Turn, seen: Collected, kind: Kind) -> None:
    """Once the whole answer is out: the usage count, the chain, the stored turn."""
    count_usage(request, turn, int(seen.prompt or 0), int(seen.completion or 0))
    if kind == "responses" and seen.response_id:
        remember_response(request, turn, seen.response_id)
    store_turn(request, turn, "".join(seen.text))


def _stream(request: Request, upstream: Any, kind: Kind, turn: Turn) -> StreamingResponse:
    """Relay the upstream's bytes as they come; count and store only after a whole stream."""
    seen = Collected()

    async def relay() -> AsyncIterator[bytes]:
        buffer = bytearray()
        finished = False
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
                buffer += chunk
                for event in sse_events(buffer):
                    seen.see(kind, event)
            finished = True
        finally:
            await upstream.aclose()
        # not for a client that left: the generator is closed mid-way, or (the server had not
        # yet told the response) the last chunks went nowhere and the server knows it by now
        if finished and not await request.is_disconnected():
            _after(request, turn, seen, kind)

    headers = {MEMORY_INFO_HEADER: _info_header(turn.info), "Cache-Control": "no-cache"}
    ctype = upstream.headers.get("content-type", "text/event-stream")
    return StreamingResponse(relay(), media_type=ctype, headers=headers)


def _read_answer(kind: Kind, answer: dict[str, Any]) -> Collected:
    usage = answer.get("usage") or {}
    if kind == "chat":
        choices = answer.get("choices") or [{}]
        text = text_of(((choices[0] or {}).get("message") or {}).get("content"))
        return Collected([text], usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0))
    text = answer.get("output_text") or "".join(
        text_of(item.get("content"))
        for item in answer.get("output") or []
        if isinstance(item, dict) and item.get("type") == "message"
    )
    rid = answer["id"] if isinstance(answer.get("id"), str) else None
    return Collected([text], usage.get("input_tokens", 0), usage.get("output_tokens", 0), rid)


async def _finish(request: Request, upstream: Any, kind: Kind, turn: Turn) -> Response:
    data = await upstream.aread()
    await upstream.aclose()
    try:
        answer = json.loads(data)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):  # not JSON: as it came
        ctype = upstream.headers.get("content-type", "application/json")
        body = scrub(data, _secret(request))
        return Response(body, status_code=upstream.status_code, media_type=ctype)
    seen = _read_answer(kind, answer)
    turn.info.stored = bool(turn.info.enabled and turn.config.auto_store and seen.text[0].strip())
    _after(request, turn, seen, kind)
    answer["memory_info"] = turn.info.model_dump(exclude_none=True)
    return JSONResponse(answer, status_code=upstream.status_code)


async def forward(request: Request, body: dict[str, Any], kind: Kind, turn: Turn) -> Response:
    """The request to the upstream and its answer back: an error as it came, a stream
    relayed, a JSON answer with ``memory_info``."""
    turn.info.stored = bool(turn.info.enabled and turn.config.auto_store)
    path = "/chat/completions" if kind == "chat" else "/responses"
    upstream = await _send(request, path, body)
    if upstream.status_code >= 400:
        try:
            return await _error_passthrough(upstream, _secret(request))
        finally:
            await upstream.aclose()
    if body.get("stream") and "text/event-stream" in upstream.headers.get("content-type", ""):
        return _stream(request, upstream, kind, turn)
    return await _finish(request, upstream, kind, turn)
