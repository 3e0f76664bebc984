"""What the extractor makes of an endpoint's answer: the JSON body or the error it means (a
retry worth one more try, a refusal, a timeout), with no key or upstream words in messages,
and the extraction parsed from it."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kemem_es.errors import ExtractionError
from kemem_es.memory.extract.answer import answer_text, parse_extraction
from kemem_es.memory.extract.base import Extraction
from kemem_es.memory.extract.judge import Candidate
from kemem_es.upstream import error_excerpt

if TYPE_CHECKING:
    pass


log = logging.getLogger("kemem_es.extract")


def load_httpx() -> ModuleType:
    try:
        import httpx
    except ModuleNotFoundError:
        raise ExtractionError(
            "infer=True talks to the LLM through httpx: pip install 'kemem-es[llm]'"
        ) from None
    return httpx


class Retry(Exception):
    """One attempt failed in a way worth one more try (connection error, 5xx)."""

    def __init__(self, error: ExtractionError) -> None:
        self.error = error


class Replies:
    """The answer handling of :class:`~kemem_es.memory.extract.client.OpenAIExtractor`."""

    where: str
    model: str
    timeout_s: float
    json_mode: bool
    _key: str | None

    def _timeout(self) -> ExtractionError:
        return ExtractionError(
            f"the extractor at {self.where} did not answer within {self.timeout_s:g} s "
            "(KEMEM_LLM_TIMEOUT_S); nothing was stored"
        )

    def _detail(self, raw: bytes) -> str:
        return error_excerpt(raw, self._key)

    def _answer(self, status: int, raw: bytes) -> Any:
        """The response body as JSON, or the error it means (a Retry when worth one more)."""
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
            raise Retry(
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
        httpx = load_httpx()
        if isinstance(exc, Retry):
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
