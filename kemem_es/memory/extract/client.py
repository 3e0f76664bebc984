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
import json
import logging
import re
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kemem_es.config import NOT_A_HEADER_TOKEN, is_header_token
from kemem_es.errors import ExtractionError, ExtractorNotConfigured
from kemem_es.logs import quiet_client_logs
from kemem_es.memory.extract.answer import answer_text, parse_extraction
from kemem_es.memory.extract.base import Extraction, Messages
from kemem_es.memory.extract.judge import Candidate, judge_section
from kemem_es.memory.extract.prompt import load_prompt, render_dialogue, render_prompt

if TYPE_CHECKING:
    import httpx

    from kemem_es.config import Settings

log = logging.getLogger("kemem_es.extract")

MAX_ANSWER_BYTES = 4 * 1024 * 1024
RETRY_PAUSE_S = 0.2


def _httpx() -> ModuleType:
    try:
        import httpx
    except ModuleNotFoundError:
        raise ExtractionError(
            "infer=True talks to the LLM through httpx: pip install 'kemem-es[llm]'"
        ) from None
    return httpx


class _Retry(Exception):
    """One attempt failed in a way worth one more try (connection error, 5xx)."""

    def __init__(self, error: ExtractionError) -> None:
        self.error = error


class OpenAIExtractor:
    """POST ``{base_url}/chat/completions`` with the prompt and the dialogue; parse and
    validate the JSON answer.

    ``timeout_s`` bounds the whole call, the one retry included (the sync client checks the
    deadline between reads, so a server that trickles bytes is cut at its next read).
    ``json_mode=False`` leaves out ``response_format`` for servers that refuse it; the prompt
    asks for JSON only either way, and fences / a ``<think>`` block are stripped."""

    _client: httpx.Client | None  # opened on first use, shared by the threads

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
        httpx = _httpx()
        try:
            url = httpx.URL(base_url.strip())
            path = url.path.rstrip("/")
            # Into the path, before a query (``?api-version=…``), not after it.
            if not path.endswith("/chat/completions"):
                url = url.copy_with(path=f"{path}/chat/completions")
        except httpx.InvalidURL:
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise ExtractionError(
                "llm_base_url: expected http(s)://host[:port]/…, e.g. https://api.openai.com/v1"
            )
        if not model.strip():
            raise ExtractionError("llm_model: empty")
        if timeout_s <= 0:
            raise ExtractionError("llm_timeout_s: must be above 0")
        if api_key and not is_header_token(api_key):
            raise ExtractionError(f"llm_api_key: {NOT_A_HEADER_TOKEN}")
        self.url = url
        self.where = str(url.copy_with(username=None, password=None, query=None))
        quiet_client_logs()  # httpx would log self.url, query string and all, at INFO
        self.model = model.strip()
        self.timeout_s = float(timeout_s)
        self.json_mode = json_mode
        self.max_tokens = max_tokens
        self.prompt = prompt if prompt is not None else load_prompt(prompt_path)
        self._key = api_key or None
        self._client = None
        self._lock = threading.Lock()

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

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    # -- answers ------------------------------------------------------------------------------
    def _timeout(self) -> ExtractionError:
        return ExtractionError(
            f"the extractor at {self.where} did not answer within {self.timeout_s:g} s "
            "(KEMEM_LLM_TIMEOUT_S); nothing was stored"
        )

    def _detail(self, raw: bytes) -> str:
        """A short, key-free excerpt of an error body (the server's own message if JSON)."""
        text = raw[:4096].decode("utf-8", "replace")
        try:
            err = json.loads(text).get("error")
            text = err.get("message", "") if isinstance(err, dict) else str(err or text)
        except (ValueError, AttributeError):
            pass
        if self._key:
            text = text.replace(self._key, "***")
        text = re.sub(r"Bearer\s+\S+", "Bearer ***", text)
        text = re.sub(r"\s+", " ", text).strip()
        return text[:200] + ("…" if len(text) > 200 else "")

    def _answer(self, status: int, raw: bytes) -> Any:
        """The response body as JSON, or the error it means (a _Retry when worth one more)."""
        where = self.where
        if status in (401, 403):
            hint = "check KEMEM_LLM_API_KEY" if self._key else "set KEMEM_LLM_API_KEY"
            raise ExtractionError(
                f"the extractor at {where} refused the credentials (HTTP {status}); {hint}"
            )
        # The upstream's own words (an organisation id, quota text, an echo of the request)
        # never go into the message, which reaches HTTP answers: a status and our reason; the
        # body's excerpt, scrubbed of the key, is logged at DEBUG and kept on ``detail``.
        if status >= 500:
            detail = self._detail(raw)
            log.debug("extractor answered HTTP %d: %s", status, detail)
            raise _Retry(
                ExtractionError(f"the extractor at {where} failed (HTTP {status})", detail=detail)
            )
        if status != 200:
            detail = self._detail(raw)
            log.debug("extractor answered HTTP %d: %s", status, detail)
            hint = ""
            if status == 404:
                hint = " — check KEMEM_LLM_BASE_URL (it usually ends in /v1) and KEMEM_LLM_MODEL"
            elif self.json_mode and "response_format" in detail:
                hint = " — set KEMEM_LLM_JSON_MODE=false for servers without JSON mode"
            raise ExtractionError(
                f"the extractor at {where} refused the request (HTTP {status}){hint}",
                detail=detail,
            )
        try:
            return json.loads(raw)
        except RecursionError:
            raise ExtractionError(
                f"the extractor at {where} answered with JSON nested too deeply"
            ) from None
        except ValueError:
            raise ExtractionError(
                f"the extractor at {where} answered HTTP 200 with a body that is not JSON; "
                "is KEMEM_LLM_BASE_URL an OpenAI-compatible endpoint?"
            ) from None

    def _retryable(self, exc: Exception) -> ExtractionError:
        """What a failed attempt means. A connection error or a 5xx is returned: worth one
        more try. A timeout (the budget is spent), a refusal or a bad answer is raised."""
        httpx = _httpx()
        if isinstance(exc, _Retry):
            return exc.error
        if isinstance(exc, httpx.TimeoutException):
            raise self._timeout() from None
        if isinstance(exc, httpx.NetworkError | httpx.RemoteProtocolError):
            return ExtractionError(
                f"could not reach the extractor at {self.where} ({type(exc).__name__})"
            )
        if isinstance(exc, httpx.HTTPError):
            raise ExtractionError(
                f"the extractor at {self.where} failed: {type(exc).__name__}"
            ) from None
        raise exc

    def _collect(self, chunks: list[bytes], chunk: bytes, size: int) -> int:
        """Keep a chunk of the body; the size so far (over MAX_ANSWER_BYTES is refused)."""
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise ExtractionError(
                f"the extractor at {self.where} sent more than {MAX_ANSWER_BYTES // 2**20} MiB"
            )
        return size

    def _done(
        self,
        body: Any,
        started: float,
        n_messages: int,
        now: datetime,
        candidates: Sequence[Candidate] = (),
    ) -> Extraction:
        labels = {c.label: c.memory_id for c in candidates}
        try:
            text, finish = answer_text(body)
            result = parse_extraction(text, now=now, finish_reason=finish, labels=labels)
        except RecursionError:  # an answer nested past Python's limit: upstream's fault
            raise ExtractionError("the extractor's answer is nested too deeply") from None
        log.info(
            "extracted %d events, %d entities from %d messages in %.0f ms (model %s)",
            len(result.events),
            len(result.entities),
            n_messages,
            (time.monotonic() - started) * 1000,
            self.model,
        )
        if result.ignored:
            log.debug("extraction: ignored keys %s", ", ".join(result.ignored[:20]))
        return result

    # -- sync -----------------------------------------------------------------------------------
    def _http(self) -> httpx.Client:
        httpx = _httpx()
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(follow_redirects=False)
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def __enter__(self) -> OpenAIExtractor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _post(self, body: dict[str, Any], deadline: float) -> Any:
        httpx = _httpx()
        error: ExtractionError | None = None
        for attempt in (1, 2):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self._timeout()
            try:
                with self._http().stream(
                    "POST", self.url, json=body, headers=self._headers(), timeout=remaining
                ) as resp:
                    chunks: list[bytes] = []
                    size = 0
                    for chunk in resp.iter_bytes():
                        size = self._collect(chunks, chunk, size)
                        if time.monotonic() > deadline:
                            raise httpx.ReadTimeout("overall deadline")
                    return self._answer(resp.status_code, b"".join(chunks))
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
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in resp.aiter_bytes():
                        size = self._collect(chunks, chunk, size)
                    return self._answer(resp.status_code, b"".join(chunks))
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
        httpx = _httpx()
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
