"""The memory side of a proxied request: its scope (``memory_context`` or the X-Kemem-*
headers, checked against the caller's key), the recall (``context()``, degraded when the
engine is down or slow), the injection of the memory text, and afterwards the usage count and
the turn stored in the session pipeline."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from kemem_es.async_kemem import AsyncKemem
from kemem_es.errors import InvalidInput, KememError
from kemem_es.prompt import DIALOGUE_HEADER
from kemem_es.server.auth import Access
from kemem_es.server.errors import hide_engine
from kemem_es.server.proxy.models import MemoryConfig, MemoryContext, MemoryInfo
from kemem_es.server.proxy.state import state

log = logging.getLogger("kemem_es.server.proxy")

DEFAULT_SESSION = "default"  # a scope's session when the request names none
MAX_CONTEXT_TURNS = 20


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


def _parse(model: type[BaseModel], raw: Any, name: str) -> Any:
    """``raw`` (the body's field, with the headers' values) validated; its errors answered as
    every body field's are (the app's RequestValidationError handler)."""
    try:
        return model.model_validate(raw or {})
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", name, *e["loc"])} for e in exc.errors()]
        raise RequestValidationError(errors) from None


def turn_of(request: Request, body: dict[str, Any], access: Access) -> Turn:
    """The request's scope and memory settings (taken out of ``body``); 403 for an agent the
    key does not serve, before anything is recalled, stored or forwarded."""
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
    agent = access.agent(ctx.agent_id, request.app.state.kemem.settings.default_agent_id)
    session = ctx.session_id or DEFAULT_SESSION
    enabled = config.enable_memory and user is not None
    info = MemoryInfo(enabled=enabled, user_id=user, agent_id=agent, session_id=session)
    if config.enable_memory and user is None:
        info.degraded = "no user: give memory_context.user_id or X-Kemem-User-Id"
    return Turn(info, config, user, agent, session)


async def recall(request: Request, turn: Turn, earlier: list[dict[str, Any]]) -> None:
    """context() for the turn; on an engine that is down or slow: degraded, no memories."""
    if not turn.info.enabled or not turn.message.strip() or turn.user is None:
        return
    km: AsyncKemem = request.app.state.kemem
    cfg = turn.config
    options: dict[str, Any] = {"context": earlier[-MAX_CONTEXT_TURNS:]} if earlier else {}
    start = time.perf_counter()
    try:
        result = await asyncio.wait_for(
            km.context(
                turn.message[-4000:], user_id=turn.user, agent_id=turn.agent,
                session_id=turn.session, max_tokens=cfg.max_tokens, limit=cfg.memory_depth,
                score_threshold=cfg.relevance_threshold, **options,
            ),
            timeout=km.settings.query_timeout_s * 3 + 5,
        )  # fmt: skip
    except InvalidInput:  # the request's fault: 422 as everywhere (the app's handler)
        raise
    except (KememError, asyncio.TimeoutError, OSError) as exc:
        why = str(exc).split("\n")[0] or type(exc).__name__
        turn.info.degraded = hide_engine(why, km.settings.url)[:300]
        log.warning("proxy memory step degraded: %s", type(exc).__name__)
        return
    finally:
        turn.info.timings_ms["memory"] = round((time.perf_counter() - start) * 1000, 2)
    if result.degraded:
        turn.info.degraded = hide_engine(result.degraded, km.settings.url)[:300]
    cut = result.text.find(DIALOGUE_HEADER)
    turn.memory_text = (result.text[:cut] if cut >= 0 else result.text).strip()
    turn.info.tokens = result.tokens.model_dump()
    turn.info.memories = [
        {"id": e.index, "memory": e.description, "score": e.score, "kind": "events"}
        for e in result.events
    ] + [
        {"id": n.index.get("index"), "memory": n.description, "score": n.score, "kind": "entities"}
        for n in result.entities
    ]


def _block(request: Request, memories: str) -> str:
    template: str = request.app.state.settings.proxy_template
    if "{memories}" in template:
        return template.replace("{memories}", memories)
    return f"{template}\n{memories}"


def _where(request: Request, turn: Turn) -> str:
    return turn.config.position or request.app.state.settings.proxy_position


def inject_chat(request: Request, messages: list[Any], turn: Turn) -> list[Any]:
    """The messages with the memory text in the system message (or before the last user's)."""
    if not turn.memory_text:
        return messages
    block, where = _block(request, turn.memory_text), _where(request, turn)
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


def inject_instructions(request: Request, body: dict[str, Any], turn: Turn) -> None:
    """A Responses request: the memory text into ``instructions``."""
    if not turn.memory_text:
        return
    block, old = _block(request, turn.memory_text), body.get("instructions") or ""
    first = _where(request, turn) == "system_start" or not old
    body["instructions"] = f"{block}\n\n{old}" if first else f"{old}\n\n{block}"
    turn.info.injected = True


def count_usage(request: Request, turn: Turn, prompt: int, completion: int) -> None:
    memory = turn.info.tokens.get("total", 0) if turn.info.injected else 0
    user = turn.user or ""
    delta = {"requests": 1, "prompt_tokens": prompt, "completion_tokens": completion,
             "memory_tokens": memory}  # fmt: skip
    state(request).usage.count(request.app.state.kemem, (turn.agent, user), delta)
    request.app.state.metrics.proxy_usage(turn.agent, user, prompt, completion, memory)


def store_turn(request: Request, turn: Turn, answer: str) -> None:
    """The turn into the session pipeline, in the background (the answer is already out)."""
    if not (turn.info.enabled and turn.config.auto_store and turn.user and answer.strip()):
        return
    km: AsyncKemem = request.app.state.kemem
    messages = [
        {"role": "user", "content": turn.message},
        {"role": "assistant", "content": answer},
    ]
    work = km.add(messages, user_id=turn.user, agent_id=turn.agent, session_id=turn.session)
    state(request).background(_discard(work), "storing the turn")


async def _discard(work: Any) -> None:
    await work


def remember_response(request: Request, turn: Turn, response_id: str) -> None:
    """A response id's chain: at once in this process, in the store in the background."""
    st, km = state(request), request.app.state.kemem
    st.chains.remember(response_id, turn.agent, turn.user, turn.session)
    work = st.chains.write(km, response_id, turn.agent, turn.user, turn.session)
    st.background(work, "recording the response id")
