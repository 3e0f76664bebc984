"""A remote embedder: any OpenAI-compatible ``POST {base}/embeddings`` service (OpenAI, TEI,
vLLM, Ollama, LiteLLM, DashScope's compatible mode), through httpx.

The texts go in batches of ``batch_size``; one ``embed`` call has one deadline
(``KEMEM_EMBED_TIMEOUT_S``) for all its batches, and a connection error, a 429 or a 5xx is
tried again while the deadline allows. Every failure is an :class:`EmbedderError` (a
``KememError``) that says what to check; a vector of another length than the model's
dimension is one too, raised before anything that needs the vectors is written.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kemem_es.embed.files import EmbedderError, short_hash
from kemem_es.upstream import UpstreamClient, error_excerpt

if TYPE_CHECKING:
    from kemem_es.config import Settings

RETRY_PAUSES_S = (0.1, 0.3, 1.0)  # between attempts, then the last one repeats
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class _Retry(Exception):
    def __init__(self, error: EmbedderError) -> None:
        self.error = error


class RemoteEmbedder(UpstreamClient):
    """Text → float32 vectors from an OpenAI-compatible embeddings endpoint; thread-safe.

    ``dim``: the model's dimension, given (``KEMEM_EMBED_DIM``) or asked of the service once
    (one text embedded at construction). Every vector the service returns is checked
    against it."""

    what = "the embedding service"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        batch_size: int = 64,
        dim: int | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        normalize: bool = True,
    ) -> None:
        try:
            import httpx  # noqa: F401  (only whether it is installed)
        except ModuleNotFoundError:
            raise EmbedderError(
                "KEMEM_EMBED_URL talks to the service through httpx: "
                "pip install 'kemem-es[remote-embed]'"
            ) from None
        self._connect(
            base_url,
            "/embeddings",
            api_key,
            EmbedderError,
            ("KEMEM_EMBED_URL", "KEMEM_EMBED_API_KEY"),
            "http://127.0.0.1:8080/v1",
        )
        if not model or not model.strip():
            raise EmbedderError("KEMEM_EMBED_MODEL: the model name the service expects is unset")
        self.model = model.strip()
        self.timeout_s = float(timeout_s)
        self.batch_size = max(1, int(batch_size))
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix
        self.normalize = normalize
        self._dim = int(dim) if dim else 0
        if not self._dim:
            probe = self._request(["dimension"], time.monotonic() + self.timeout_s)
            self._dim = int(probe.shape[1])

    @classmethod
    def from_settings(cls, settings: Settings) -> RemoteEmbedder:
        if not settings.embed_url:
            raise EmbedderError("KEMEM_EMBED_URL is unset")
        key = settings.embed_api_key.get_secret_value() if settings.embed_api_key else None
        return cls(
            settings.embed_url,
            settings.embed_model or "",
            api_key=key,
            timeout_s=settings.embed_timeout_s,
            batch_size=settings.embed_batch,
            dim=settings.embed_dim,
            query_prefix=settings.embed_query_prefix,
            document_prefix=settings.embed_document_prefix,
            normalize=settings.embed_normalize,
        )

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        """``model @ host`` (+ a digest of the prefixes): what the index's calibration and
        model check are keyed by."""
        host = self.url.host + (f":{self.url.port}" if self.url.port else "")
        extra = []
        if self.query_prefix or self.document_prefix:
            extra.append("prefixes " + short_hash(self.query_prefix, self.document_prefix))
        if not self.normalize:
            extra.append("not normalised")
        tail = f" ({', '.join(extra)})" if extra else ""
        return f"{self.model} @ {host}{tail}"

    def __repr__(self) -> str:  # never the key
        return f"RemoteEmbedder({self.where!r}, model={self.model!r}, dim={self._dim})"

    # -- the Embedder protocol ------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Memories' texts (``document_prefix`` before each) → (n, dim) float32."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_one() for one text")
        return self._embed([self.document_prefix + t for t in texts])

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query texts (``query_prefix`` before each) → (n, dim) float32."""
        if isinstance(texts, str):
            raise TypeError("embed_queries() takes a sequence of texts")
        return self._embed([self.query_prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    # -- the calls ------------------------------------------------------------------------------
    def _embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        deadline = time.monotonic() + self.timeout_s
        parts = [
            self._request(texts[i : i + self.batch_size], deadline)
            for i in range(0, len(texts), self.batch_size)
        ]
        out = np.concatenate(parts, axis=0)
        if self.normalize:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32, copy=False)

    def _timeout(self) -> EmbedderError:
        return EmbedderError(
            f"the embedding service at {self.where} did not answer within {self.timeout_s:g} s "
            "(KEMEM_EMBED_TIMEOUT_S); nothing was written"
        )

    def _request(self, texts: list[str], deadline: float) -> np.ndarray:
        """One batch, tried again on a connection error, 429 or 5xx while ``deadline`` allows."""
        import httpx

        body = {"model": self.model, "input": texts, "encoding_format": "float"}
        error: EmbedderError | None = None
        for attempt in range(1, 100):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise error or self._timeout()
            try:
                with self._http().stream(
                    "POST", self.url, json=body, headers=self._headers(), timeout=remaining
                ) as resp:
                    raw = self._read(resp, deadline, MAX_ANSWER_BYTES)
                    return self._vectors(resp.status_code, raw, len(texts))
            except _Retry as exc:
                error = exc.error
            except httpx.TimeoutException:
                raise self._timeout() from None
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                error = EmbedderError(
                    f"could not reach the embedding service at {self.where} "
                    f"({type(exc).__name__}); check KEMEM_EMBED_URL"
                )
            except httpx.HTTPError as exc:
                raise EmbedderError(
                    f"the embedding service at {self.where} failed: {type(exc).__name__}"
                ) from None
            pause = RETRY_PAUSES_S[min(attempt, len(RETRY_PAUSES_S)) - 1]
            if time.monotonic() + pause >= deadline:
                raise error
            time.sleep(pause)
        raise error or self._timeout()

    def _detail(self, raw: bytes) -> str:
        return error_excerpt(raw, self._key)

    def _vectors(self, status: int, raw: bytes, n: int) -> np.ndarray:
        where = self.where
        if status in (401, 403):
            hint = "check KEMEM_EMBED_API_KEY" if self._key else "set KEMEM_EMBED_API_KEY"
            raise EmbedderError(f"the embedding service at {where} refused (HTTP {status}); {hint}")
        if status == 429 or status >= 500:
            raise _Retry(
                EmbedderError(
                    f"the embedding service at {where} failed (HTTP {status}): "
                    f"{self._detail(raw)}; nothing was written"
                )
            )
        if status != 200:
            hint = " — check KEMEM_EMBED_URL (usually …/v1) and KEMEM_EMBED_MODEL"
            raise EmbedderError(
                f"the embedding service at {where} refused the request (HTTP {status}): "
                f"{self._detail(raw)}{hint if status == 404 else ''}"
            )
        try:
            data: Any = json.loads(raw)["data"]
            rows = sorted(data, key=lambda d: int(d.get("index", 0)))
            vectors = [r["embedding"] for r in rows]
            out = np.asarray(vectors, dtype=np.float32)
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EmbedderError(
                f"the embedding service at {where} answered HTTP 200 without an OpenAI-style "
                "body ({'data': [{'index', 'embedding'}]}); is KEMEM_EMBED_URL right?"
            ) from None
        if out.ndim != 2 or out.shape[0] != n:
            raise EmbedderError(
                f"the embedding service at {where} returned {len(vectors)} vectors for {n} texts"
            )
        if self._dim and out.shape[1] != self._dim:
            raise EmbedderError(
                f"the embedding service at {where} returned {out.shape[1]}-dimensional vectors, "
                f"but the model's dimension is {self._dim} (KEMEM_EMBED_DIM, or what it "
                "answered first); nothing was written"
            )
        if not np.isfinite(out).all():
            raise EmbedderError(f"the embedding service at {where} returned NaN or infinity")
        return out
