"""The default extractor: any OpenAI-compatible ``/chat/completions`` endpoint, through httpx.

Why plain httpx rather than the official ``openai`` client: one small, pure-Python dependency
(the SDK itself sits on httpx and adds its own packages and release cadence); a timeout and a
retry policy that are ours and explicit (the SDK's defaults are a 10-minute timeout and two
retries with backoff, which would hide the bound); and a request that is exactly the documented
JSON, which the many "compatible" servers (vLLM, Ollama, llama.cpp, DashScope, DeepSeek) accept
and which a loopback test server can check field by field.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kemem_es.errors import ExtractionError, ExtractorNotConfigured
from kemem_es.memory.extract.answer import answer_text
from kemem_es.memory.extract.base import Extraction, Messages
from kemem_es.memory.extract.judge import Candidate, judge_section
from kemem_es.memory.extract.prompt import load_prompt, render_dialogue, render_prompt
from kemem_es.memory.extract.replies import Replies, load_httpx
from kemem_es.upstream import UpstreamClient

if TYPE_CHECKING:
    import httpx

    from kemem_es.config import Settings

log = logging.getLogger("kemem_es.extract")

MAX_ANSWER_BYTES = 4 * 1024 * 1024
RETRY_PAUSE_S = 0.2


class OpenAIExtractor(Replies, UpstreamClient):
    """POST ``{base_url}/chat/completions`` with the prompt and the dialogue; parse and
    validate the JSON answer.

    ``timeout_s`` bounds the whole call, the one retry included (the sync client checks the
    deadline between reads, so a server that trickles bytes is cut at its next read).
    ``json_mode=False`` leaves out ``response_format`` for servers that refuse it; the prompt
    asks for JSON only either way, and fences / a ``<think>`` block are stripped."""

    what = "the extractor"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        json_mode: bool = True,
        prompt: str | None = None,
        prompt_path: Path | None = None,
        max_tokens: int | None = None,
    ) -> None:
        load_httpx()
        if timeout_s <= 0:
            raise ExtractionError("llm_timeout_s: must be above 0")
        self._connect(
            base_url,
            "/chat/completions",
            api_key,
            ExtractionError,
            ("llm_base_url", "llm_api_key"),
            "https://api.openai.com/v1",
        )
        if not model.strip():
            raise ExtractionError("llm_model: empty")
        self.model = model.strip()
        self.timeout_s = float(timeout_s)
        self.json_mode = json_mode
        self.max_tokens = max_tokens
        self.prompt = prompt if prompt is not None else load_prompt(prompt_path)

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIExtractor:
        if not settings.llm_base_url or not settings.llm_model:
            raise ExtractorNotConfigured(
                "infer: needs an LLM, and none is configured: set KEMEM_LLM_BASE_URL (an "
                "OpenAI-compatible endpoint, e.g. https://api.openai.com/v1) and KEMEM_LLM_MODEL"
            )
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        return cls(
            settings.llm_base_url,
            settings.llm_model,
            api_key=key,
            timeout_s=settings.llm_timeout_s,
            json_mode=settings.llm_json_mode,
            prompt_path=settings.extract_prompt_path,
        )

    def __repr__(self) -> str:  # never the key
        return f"OpenAIExtractor({self.where!r}, model={self.model!r})"

    # -- request ------------------------------------------------------------------------------
    def request_body(
        self,
        messages: Messages,
        *,
        user_name: str | None = None,
        agent_name: str | None = None,
        now: datetime,
        candidates: Sequence[Candidate] = (),
    ) -> dict[str, Any]:
        dialogue = render_dialogue(messages, user_name=user_name, agent_name=agent_name)
        system = render_prompt(self.prompt, now=now, user_name=user_name, agent_name=agent_name)
        system += judge_section(candidates)  # facts that change: docs/facts.md
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": f"以下是需要整理的对话：\n\n{dialogue}"},
            ],
            "temperature": 0,
        }
        if self.json_mode:
            body["response_format"] = {"type": "json_object"}
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        return body

    # -- sync -----------------------------------------------------------------------------------
    def __enter__(self) -> OpenAIExtractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, body: dict[str, Any], deadline: float) -> Any:
        error: ExtractionError | None = None
        for attempt in (1, 2):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout()
            try:
                with self._http().stream(
                    "POST", self.url, json=body, headers=self._headers(), timeout=remaining
                ) as resp:
                    raw = self._read(resp, deadline, MAX_ANSWER_BYTES)
                    return self._answer(resp.status_code, raw)
            except Exception as exc:
                error = self._retryable(exc)
            log.debug("extractor attempt %d failed: %s", attempt, error)
            if attempt == 1:
                time.sleep(max(0.0, min(RETRY_PAUSE_S, deadline - time.monotonic())))
        assert error is not None
        raise error

    def extract(
        self,
        messages: Messages,
        *,
        user_name: str | None = None,
        agent_name: str | None = None,
        now: datetime,
        candidates: Sequence[Candidate] = (),
    ) -> Extraction:
        """The dialogue's events and entities, validated, without scope. Raises
        :class:`ExtractionError` (endpoint or answer) or :class:`InvalidInput` (messages).
        ``candidates``: the user's current memories, shown to the model to judge each entity
        ADD / UPDATE / SUPERSEDE / NOOP (``extract.judge``)."""
        started = time.monotonic()
        body = self.request_body(
            messages, user_name=user_name, agent_name=agent_name, now=now, candidates=candidates
        )
        answer = self._post(body, started + self.timeout_s)
        return self._done(answer, started, _count(messages), now, candidates)

    def complete(self, system: str, user: str) -> str:
        """One plain chat completion (no JSON mode), bounded like ``extract``: the session
        summary (kemem_es/session/summary.py) uses the same endpoint and client."""
        started = time.monotonic()
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
        }
        if self.max_tokens:
            body["max_tokens"] = self.max_tokens
        text, _ = answer_text(self._post(body, started + self.timeout_s))
        return re.sub(r"<think>.*?</think>", "", text, flags=re.S).strip()

    # -- async ----------------------------------------------------------------------------------
    async def _apost(self, client: httpx.AsyncClient, body: dict[str, Any], deadline: float) -> Any:
        error: ExtractionError | None = None
        for attempt in (1, 2):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout()
            try:
                async with client.stream(
                    "POST", self.url, json=body, headers=self._headers(), timeout=remaining
                ) as resp:
                    raw = await self._aread(resp, MAX_ANSWER_BYTES)
                    return self._answer(resp.status_code, raw)
            except Exception as exc:
                error = self._retryable(exc)
            log.debug("extractor attempt %d failed: %s", attempt, error)
            if attempt == 1:
                await asyncio.sleep(max(0.0, min(RETRY_PAUSE_S, deadline - time.monotonic())))
        assert error is not None
        raise error

    async def aextract(
        self,
        messages: Messages,
        *,
        user_name: str | None = None,
        agent_name: str | None = None,
        now: datetime,
        candidates: Sequence[Candidate] = (),
    ) -> Extraction:
        """:meth:`extract` for an event loop; the whole call is bounded by ``timeout_s``."""
        httpx = load_httpx()
        started = time.monotonic()
        body = self.request_body(
            messages, user_name=user_name, agent_name=agent_name, now=now, candidates=candidates
        )
        async with httpx.AsyncClient(follow_redirects=False) as client:
            try:
                answer = await asyncio.wait_for(
                    self._apost(client, body, started + self.timeout_s), self.timeout_s + 0.05
                )
            except asyncio.TimeoutError:
                raise self._timeout() from None
        return self._done(answer, started, _count(messages), now, candidates)


def _count(messages: Messages) -> int:
    return 1 if isinstance(messages, str) else len(messages)
