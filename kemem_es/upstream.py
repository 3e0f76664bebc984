"""What every client of an upstream service (an LLM, an embedding service) does alike, in one
place: the endpoint, its key and connection, an answer read within a size and a deadline
(``UpstreamClient``), and what kemem-es may repeat of an error body (``error_excerpt``): a short
excerpt, the service's own message when the body is JSON, with the caller's key and any bearer
token masked. HTTP answers never carry even this (server/errors.py gives a status and a generic
reason), only KememError messages to the Python caller and DEBUG logs do."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kemem_es.config_rules import NOT_A_HEADER_TOKEN, is_header_token
from kemem_es.logs import quiet_client_logs

if TYPE_CHECKING:
    import httpx

EXCERPT_CHARS = 200


def error_excerpt(raw: bytes, key: str | None) -> str:
    """A short, key-free excerpt of an error body (the server's own message if JSON)."""
    text = raw[:4096].decode("utf-8", "replace")
    try:
        err = json.loads(text).get("error")
        text = err.get("message", "") if isinstance(err, dict) else str(err or text)
    except (ValueError, AttributeError):
        pass
    if key:
        text = text.replace(key, "***")
    text = re.sub(r"Bearer\s+\S+", "Bearer ***", text)
    text = re.sub(r"\s+", " ", text).strip()
    return text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")


class UpstreamClient:
    """What every client of an OpenAI-compatible upstream (the extractor, the rewriter, the
    remote embedder) does alike, in one place: the endpoint's URL (``suffix`` appended to the
    base's path, before any query string such as ``?api-version=…``), ``where`` for messages
    (no credentials and no query string: an ``api-key`` may sit there), the bearer key (it
    goes into a header, so printable ASCII only), one httpx client opened on first use and
    shared by threads, and an answer read within a size and a deadline. httpx logs each
    request's URL at INFO, query string and all: quieted here for every such client."""

    what = "the service"  # a message's subject: "the extractor at {where} …"
    url: httpx.URL
    where: str
    _key: str | None

    def _connect(
        self,
        base_url: str,
        suffix: str,
        api_key: str | None,
        fail: Callable[[str], Exception],
        settings: tuple[str, str],
        example: str,
    ) -> None:
        """Resolve and check the endpoint; ``fail`` makes the error raised for a bad URL or
        key, named by ``settings`` (the URL's and the key's setting), with ``example``."""
        import httpx

        try:
            url: httpx.URL | None = httpx.URL(base_url.strip())
            assert url is not None
            path = url.path.rstrip("/")
            if not path.endswith(suffix):
                url = url.copy_with(path=f"{path}{suffix}")
        except httpx.InvalidURL:
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise fail(f"{settings[0]}: expected http(s)://host[:port]/…, e.g. {example}")
        if api_key and not is_header_token(api_key):
            raise fail(f"{settings[1]}: {NOT_A_HEADER_TOKEN}")  # never the key itself
        quiet_client_logs()
        self.url = url
        self.where = str(url.copy_with(username=None, password=None, query=None))
        self._key = api_key or None
        self._fail = fail
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return headers

    def _http(self) -> httpx.Client:
        import httpx

        with self._lock:
            if self._client is None:
                self._client = httpx.Client(follow_redirects=False)
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    def _read(self, resp: httpx.Response, deadline: float, max_bytes: int) -> bytes:
        """The answer's body: past ``max_bytes`` refused (``fail``), past ``deadline`` cut
        at the next read (``httpx.ReadTimeout``, which each caller reads as its timeout)."""
        import httpx

        chunks: list[bytes] = []
        size = 0
        for chunk in resp.iter_bytes():
            size = self._keep(chunks, chunk, size, max_bytes)
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout("overall deadline")
        return b"".join(chunks)

    async def _aread(self, resp: httpx.Response, max_bytes: int) -> bytes:
        """``_read`` for an event loop (the caller bounds it with ``asyncio.wait_for``)."""
        chunks: list[bytes] = []
        size = 0
        async for chunk in resp.aiter_bytes():
            size = self._keep(chunks, chunk, size, max_bytes)
        return b"".join(chunks)

    def _keep(self, chunks: list[bytes], chunk: bytes, size: int, max_bytes: int) -> int:
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            raise self._fail(f"{self.what} at {self.where} sent more than {_size(max_bytes)}")
        return size


def _size(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 1024} KiB"
