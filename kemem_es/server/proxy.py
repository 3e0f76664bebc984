"""The OpenAI-compatible proxy (docs/proxy.md): ``POST /v1/chat/completions`` and
``POST /v1/responses`` on ``kemem-es serve``. A chat app keeps its OpenAI SDK and points its
base URL here: each request is recalled for (``context()`` of the last user turn, the earlier
turns as the recall's dialogue), the memory text is injected into the system message, the
request goes on to ``KEMEM_PROXY_UPSTREAM_URL`` and its answer comes back unchanged, plus
``memory_info`` (a header on a stream). After the answer the turn is stored in the session
pipeline (``auto_store``).

- Scope: ``memory_context`` ``{user_id, agent_id, session_id}`` in the body (the SDKs'
  ``extra_body``) or the headers ``X-Kemem-User-Id`` / ``X-Kemem-Agent-Id`` /
  ``X-Kemem-Session-Id`` (the SDKs' ``default_headers``); the agent must be one the caller's
  kemem key serves (keyless loopback: any; default ``KEMEM_DEFAULT_AGENT_ID``). The client's
  bearer token is its kemem key, never forwarded; the upstream gets
  ``KEMEM_PROXY_UPSTREAM_KEY``, which no answer, error or log line shows.
- ``memory_config``: ``enable_memory``, ``memory_depth`` (recalled details at most),
  ``relevance_threshold``, ``auto_store``, ``max_tokens`` (the memory budget), ``position``.
- A stream is relayed chunk by chunk as the upstream sends it. Its turn is stored once the
  upstream finished it and the client read it all; a client that disconnects early stores
  nothing (the upstream call is closed then too).
- The memory step degrades: engine down or slow → the request is forwarded without memories
  and ``memory_info.degraded`` says why. The upstream's errors come back with their status
  (the key scrubbed from the body); an unreachable upstream is 502, a slow one 504.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kemem_es.async_kemem import AsyncKemem
from kemem_es.errors import InvalidInput, KememError
from kemem_es.prompt import DIALOGUE_HEADER
from kemem_es.server.auth import Access, authenticate
from kemem_es.server.errors import ApiError, hide_engine

log = logging.getLogger("kemem_es.server.proxy")
router = APIRouter(tags=["proxy"])

MEMORY_INFO_HEADER = "X-Kemem-Memory-Info"
DEFAULT_SESSION = "default"  # a scope's session when the request names none
MAX_CONTEXT_TURNS = 20
MAX_RESPONSE_IDS = 10_000  # response id → session, newest kept


class MemoryConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enable_memory: bool = True
    memory_depth: int | None = Field(None, ge=1, le=100, description="recalled details at most")
    relevance_threshold: float | None = Field(None, ge=0, le=1)
    auto_store: bool = True
    max_tokens: int | None = Field(None, ge=1, le=100_000, description="the memory's budget")
    position: Literal["system_end", "system_start", "before_last_user"] | None = None


class MemoryContext(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str | None = Field(None, min_length=1, max_length=512)
    agent_id: str | None = Field(None, min_length=1, max_length=512)
    session_id: str | None = Field(None, min_length=1, max_length=512)


class MemoryInfo(BaseModel):
    """What the memory step did for this request."""

    enabled: bool
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    injected: bool = False
    memories: list[dict[str, Any]] = Field(
        default_factory=list, description="the recalled memories: id, memory, score, kind"
    )
    tokens: dict[str, int] = Field(default_factory=dict, description="the memory text's tokens")
    timings_ms: dict[str, float] = Field(default_factory=dict)
    stored: bool | None = Field(None, description="auto_store: the turn will be stored")
    degraded: str | None = Field(None, description="why no memories were used")


@dataclass
class Usage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    memory_tokens: int = 0


@dataclass
class ProxyState:
    """Per app: the upstream client, token usage per (agent, user), response id → session."""

    client: Any = None
    usage: dict[tuple[str, str], Usage] = field(default_factory=dict)
    sessions: OrderedDict[str, str] = field(default_factory=OrderedDict)
    stores: set[asyncio.Task[Any]] = field(default_factory=set)

    def remember_response(self, response_id: str, session_id: str) -> None:
        self.sessions[response_id] = session_id
        while len(self.sessions) > MAX_RESPONSE_IDS:
            self.sessions.popitem(last=False)


def state(request: Request) -> ProxyState:
    app = request.app
    if not hasattr(app.state, "proxy"):
        app.state.proxy = ProxyState()
    return app.state.proxy


async def close_proxy(app: Any) -> None:
    """At shutdown: the turns being stored, then the upstream client."""
    st: ProxyState | None = getattr(app.state, "proxy", None)
    if st is None:
        return
    if st.stores:
        await asyncio.wait(set(st.stores), timeout=10)
    if st.client is not None:
        await st.client.aclose()


# -- helpers ----------------------------------------------------------------------------
def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text", "")
            for p in content
            if isinstance(p, dict) and p.get("type") in ("text", "input_text", "output_text")
        ]
        return "\n".join(t for t in parts if isinstance(t, str))
    return ""


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


def _parse(model: type[BaseModel], raw: Any, name: str) -> Any:
    try:
        return model.model_validate(raw or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in (name, *first["loc"]))
        msg = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        raise ApiError(422, "invalid_input", f"{where}: {msg}", where) from None


@dataclass
class Turn:
    """One proxied request's memory side."""

    info: MemoryInfo
    config: MemoryConfig
    user: str | None
    agent: str
    session: str
    message: str = ""
    memory_text: str = ""


def _scope(request: Request, body: dict[str, Any], access: Access) -> Turn:
    config = _parse(MemoryConfig, body.pop("memory_config", None), "memory_config")
    given = body.pop("memory_context", None)
    scope = dict(given) if isinstance(given, dict) else given
    if isinstance(scope, dict) or scope is None:  # the headers fill what the body leaves out
        scope = scope or {}
        for name in ("user_id", "agent_id", "session_id"):
            header = request.headers.get(f"x-kemem-{name.replace('_', '-')}")
            if scope.get(name) is None and header:
                scope[name] = header
    ctx = _parse(MemoryContext, scope, "memory_context")
    user = ctx.user_id
    agent = ctx.agent_id or request.app.state.kemem.settings.default_agent_id
    access.check(agent)  # 403 before anything is recalled, stored or forwarded
    session = ctx.session_id or DEFAULT_SESSION
    enabled = config.enable_memory and user is not None
    info = MemoryInfo(enabled=enabled, user_id=user, agent_id=agent, session_id=session)
    if config.enable_memory and user is None:
        info.degraded = "no user: give memory_context.user_id or X-Kemem-User-Id"
    return Turn(info, config, user, agent, session)


async def _recall(request: Request, turn: Turn, earlier: list[dict[str, Any]]) -> None:
    """context() for the turn; on an engine that is down or slow: degraded, no memories."""
    if not turn.info.enabled or not turn.message.strip() or turn.user is None:
        return
    km: AsyncKemem = request.app.state.kemem
    cfg = turn.config
    options: dict[str, Any] = {}
    if earlier:
        options["context"] = earlier[-MAX_CONTEXT_TURNS:]
    start = time.perf_counter()
    deadline = km.settings.query_timeout_s * 3 + 5
    try:
        result = await asyncio.wait_for(
            km.context(
                turn.message[-4000:],
                user_id=turn.user,
                agent_id=turn.agent,
                session_id=turn.session,
                max_tokens=cfg.max_tokens,
                limit=cfg.memory_depth,
                score_threshold=cfg.relevance_threshold,
                **options,
            ),
            timeout=deadline,
        )
    except InvalidInput as exc:
        raise ApiError(422, "invalid_input", str(exc), exc.field) from None
    except (KememError, asyncio.TimeoutError, OSError) as exc:
        why = str(exc).split("\n")[0] or type(exc).__name__
        turn.info.degraded = hide_engine(why, km.settings.url)[:300]
        log.warning("proxy memory step degraded: %s", type(exc).__name__)
        return
    finally:
        turn.info.timings_ms["memory"] = round((time.perf_counter() - start) * 1000, 2)
    if result.degraded:
        turn.info.degraded = hide_engine(result.degraded, km.settings.url)[:300]
    text = result.text
    cut = text.find(DIALOGUE_HEADER)
    memories = (text[:cut] if cut >= 0 else text).strip()
    turn.memory_text = memories
    turn.info.tokens = result.tokens.model_dump()
    hits = [
        {"id": e.index, "memory": e.description, "score": e.score, "kind": "events"}
        for e in result.events
    ] + [
        {"id": n.index.get("index"), "memory": n.description, "score": n.score, "kind": "entities"}
        for n in result.entities
    ]
    turn.info.memories = hits


def _template(request: Request, memories: str) -> str:
    template: str = request.app.state.settings.proxy_template
    return (
        template.replace("{memories}", memories)
        if "{memories}" in template
        else (f"{template}\n{memories}")
    )


def inject_chat(request: Request, messages: list[Any], turn: Turn) -> list[Any]:
    if not turn.memory_text:
        return messages
    block = _template(request, turn.memory_text)
    where = turn.config.position or request.app.state.settings.proxy_position
    out = list(messages)
    if where == "before_last_user":
        last = max(
            (i for i, m in enumerate(out) if isinstance(m, dict) and m.get("role") == "user"),
            default=len(out),
        )
        out.insert(last, {"role": "system", "content": block})
    else:
        first = next(
            (i for i, m in enumerate(out)
             if isinstance(m, dict) and m.get("role") in ("system", "developer")),
            None,
        )  # fmt: skip
        if first is None:
            out.insert(0, {"role": "system", "content": block})
        else:
            msg = dict(out[first])
            old = text_of(msg.get("content"))
            msg["content"] = f"{block}\n\n{old}" if where == "system_start" else f"{old}\n\n{block}"
            out[first] = msg
    turn.info.injected = True
    return out


def _count_usage(request: Request, turn: Turn, prompt: int, completion: int) -> None:
    memory = turn.info.tokens.get("total", 0) if turn.info.injected else 0
    u = state(request).usage.setdefault((turn.agent, turn.user or ""), Usage())
    u.requests += 1
    u.prompt_tokens += prompt
    u.completion_tokens += completion
    u.memory_tokens += memory
    request.app.state.metrics.proxy_usage(turn.agent, turn.user or "", prompt, completion, memory)


def _store(request: Request, turn: Turn, answer: str) -> None:
    """The turn into the session pipeline, in the background (the answer is already out)."""
    if not (turn.info.enabled and turn.config.auto_store and turn.user and answer.strip()):
        return
    km: AsyncKemem = request.app.state.kemem
    messages = [
        {"role": "user", "content": turn.message},
        {"role": "assistant", "content": answer},
    ]

    async def store() -> None:
        try:
            await km.add(messages, user_id=turn.user, agent_id=turn.agent, session_id=turn.session)
        except Exception as exc:  # the answer went out; the log says the turn was lost
            log.warning("proxy: storing the turn failed: %s", type(exc).__name__)

    st = state(request)
    task = asyncio.ensure_future(store())
    st.stores.add(task)
    task.add_done_callback(st.stores.discard)


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


Kind = Literal["chat", "responses"]


def _sse_events(buffer: bytearray) -> list[dict[str, Any]]:
    """Complete SSE ``data:`` JSON events taken off the front of ``buffer``."""
    out: list[dict[str, Any]] = []
    while True:
        end = buffer.find(b"\n\n")
        if end < 0:
            return out
        block = bytes(buffer[:end]).decode("utf-8", "replace")
        del buffer[: end + 2]
        for line in block.splitlines():
            if line.startswith("data:"):
                data = line[5:].strip()
                if data and data != "[DONE]":
                    try:
                        obj = json.loads(data)
                    except ValueError:
                        continue
                    if isinstance(obj, dict):
                        out.append(obj)


@dataclass
class Collected:
    text: list[str] = field(default_factory=list)
    prompt: int = 0
    completion: int = 0
    response_id: str | None = None
    done: bool = False

    def see(self, kind: Kind, event: dict[str, Any]) -> None:
        if kind == "chat":
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                if choice.get("index", 0) == 0 and isinstance(delta.get("content"), str):
                    self.text.append(delta["content"])
                if choice.get("finish_reason"):
                    self.done = True
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
                self.done = True


def _stream(request: Request, upstream: Any, kind: Kind, turn: Turn) -> StreamingResponse:
    """Relay the upstream's bytes as they come; store the turn only after a whole stream."""
    seen = Collected()

    async def relay() -> AsyncIterator[bytes]:
        buffer = bytearray()
        finished = False
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
                buffer += chunk
                for event in _sse_events(buffer):
                    seen.see(kind, event)
            finished = True
        finally:
            await upstream.aclose()
            if finished:  # not on a client that left (the generator is closed mid-way)
                _count_usage(request, turn, seen.prompt, seen.completion)
                if kind == "responses" and seen.response_id:
                    state(request).remember_response(seen.response_id, turn.session)
                _store(request, turn, "".join(seen.text))

    headers = {MEMORY_INFO_HEADER: _info_header(turn.info), "Cache-Control": "no-cache"}
    ctype = upstream.headers.get("content-type", "text/event-stream")
    return StreamingResponse(relay(), media_type=ctype, headers=headers)


async def _finish(request: Request, upstream: Any, kind: Kind, turn: Turn) -> Response:
    secret = _secret(request)
    data = await upstream.aread()
    await upstream.aclose()
    try:
        answer = json.loads(data)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):  # not JSON: as it came
        ctype = upstream.headers.get("content-type", "application/json")
        return Response(scrub(data, secret), status_code=upstream.status_code, media_type=ctype)
    usage = answer.get("usage") or {}
    if kind == "chat":
        choices = answer.get("choices") or [{}]
        text = text_of(((choices[0] or {}).get("message") or {}).get("content"))
        prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    else:
        text = answer.get("output_text") or "".join(
            text_of(item.get("content"))
            for item in answer.get("output") or []
            if isinstance(item, dict) and item.get("type") == "message"
        )
        prompt, completion = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
        if isinstance(answer.get("id"), str):
            state(request).remember_response(answer["id"], turn.session)
    _count_usage(request, turn, int(prompt or 0), int(completion or 0))
    turn.info.stored = bool(turn.info.enabled and turn.config.auto_store and text.strip())
    _store(request, turn, text)
    answer["memory_info"] = turn.info.model_dump(exclude_none=True)
    return JSONResponse(answer, status_code=upstream.status_code)


async def _proxy(request: Request, body: dict[str, Any], kind: Kind, turn: Turn) -> Response:
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


# -- routes -----------------------------------------------------------------------------
class ChatCompletionRequest(BaseModel):
    """An OpenAI chat-completions request (every field of the upstream's API passes through),
    plus ``memory_config`` and ``memory_context``, which stay here."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[dict[str, Any]]
    stream: bool | None = None
    memory_config: MemoryConfig | None = None
    memory_context: MemoryContext | None = None


class ResponsesRequest(BaseModel):
    """An OpenAI Responses request (passed through), plus ``memory_config`` and
    ``memory_context``; ``previous_response_id`` continues the session that id answered in."""

    model_config = ConfigDict(extra="allow")

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    previous_response_id: str | None = None
    stream: bool | None = None
    memory_config: MemoryConfig | None = None
    memory_context: MemoryContext | None = None


class ProxyAnswer(BaseModel):
    """The upstream's answer as it came, plus ``memory_info`` (a stream: the
    X-Kemem-Memory-Info header, JSON)."""

    model_config = ConfigDict(extra="allow")

    memory_info: MemoryInfo | None = None


_PROXY_ERRORS: dict[int | str, dict[str, Any]] = {
    502: {"description": "upstream_unavailable: the upstream model is unreachable"},
    504: {"description": "upstream_timeout: the upstream model did not answer in time"},
}


@router.post(
    "/v1/chat/completions",
    summary="OpenAI chat completions with memory (the proxy)",
    response_model=ProxyAnswer,
    responses=_PROXY_ERRORS,
)
async def chat_completions(
    given: ChatCompletionRequest, request: Request, access: Access = Depends(authenticate)
) -> Response:
    body = given.model_dump(exclude_unset=True)
    turn = _scope(request, body, access)
    messages = body["messages"]
    last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    if last is not None:
        turn.message = text_of(messages[last].get("content"))
        earlier = [
            {"role": m.get("role"), "content": text_of(m.get("content"))}
            for m in messages[:last]
            if m.get("role") in ("user", "assistant")
        ]
        await _recall(request, turn, earlier)
        body["messages"] = inject_chat(request, messages, turn)
    return await _proxy(request, body, "chat", turn)


@router.post(
    "/v1/responses",
    summary="OpenAI Responses with memory (the proxy; previous_response_id keeps the session)",
    response_model=ProxyAnswer,
    responses=_PROXY_ERRORS,
)
async def responses(
    given: ResponsesRequest, request: Request, access: Access = Depends(authenticate)
) -> Response:
    body = given.model_dump(exclude_unset=True)
    turn = _scope(request, body, access)
    previous = body.get("previous_response_id")
    if turn.session == DEFAULT_SESSION:  # none given: the chain of responses is the session
        known = state(request).sessions.get(previous) if isinstance(previous, str) else None
        turn.session = known or f"resp-{uuid.uuid4().hex[:16]}"
        turn.info.session_id = turn.session
    said = body["input"]
    if isinstance(said, str):
        turn.message, earlier = said, []
    else:
        items = [i for i in said if isinstance(i, dict) and i.get("role") in ("user", "assistant")]
        users = [i for i, item in enumerate(items) if item.get("role") == "user"]
        cut = users[-1] if users else len(items)
        turn.message = text_of(items[cut].get("content")) if users else ""
        earlier = [{"role": i["role"], "content": text_of(i.get("content"))} for i in items[:cut]]
    await _recall(request, turn, earlier)
    if turn.memory_text:
        block = _template(request, turn.memory_text)
        old = body.get("instructions") or ""
        where = turn.config.position or request.app.state.settings.proxy_position
        body["instructions"] = (
            f"{block}\n\n{old}" if where == "system_start" or not old else f"{old}\n\n{block}"
        )
        turn.info.injected = True
    return await _proxy(request, body, "responses", turn)


class UsageRow(BaseModel):
    agent_id: str
    user_id: str
    requests: int
    prompt_tokens: int
    completion_tokens: int
    memory_tokens: int


class UsageList(BaseModel):
    results: list[UsageRow]


@router.get("/v1/usage", summary="The proxy's token usage per agent and user (since start)")
async def proxy_usage(
    request: Request,
    agent_id: str | None = None,
    user_id: str | None = None,
    access: Access = Depends(authenticate),
) -> UsageList:
    if agent_id is not None:
        access.check(agent_id)
    rows = [
        UsageRow(agent_id=a, user_id=u, **vars(n))
        for (a, u), n in sorted(state(request).usage.items())
        if (agent_id is None or a == agent_id)
        and (user_id is None or u == user_id)
        and (access.agents is None or a in access.agents)
    ]
    return UsageList(results=rows)
