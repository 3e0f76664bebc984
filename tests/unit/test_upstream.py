"""What every upstream client shares (kemem_es/upstream.py): the scrub of an error body, and the
endpoint, key and log checks of the extractor, the rewriter and the remote embedder alike."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from kemem_es.embed.remote import RemoteEmbedder
from kemem_es.errors import KememError
from kemem_es.memory.extract.client import OpenAIExtractor
from kemem_es.search.rewrite import Rewriter
from kemem_es.upstream import EXCERPT_CHARS, error_excerpt


def test_the_services_own_message_with_the_key_and_bearer_tokens_masked() -> None:
    body = {"error": {"message": "bad key sk-live-1 for  Bearer abc.def\n quota"}}
    got = error_excerpt(json.dumps(body).encode(), "sk-live-1")
    assert got == "bad key *** for Bearer *** quota"


def test_a_plain_body_is_cut_short_and_a_string_error_read() -> None:
    assert error_excerpt(b'{"error": "rate limited"}', None) == "rate limited"
    long = error_excerpt(("x" * 5000).encode(), None)
    assert len(long) == EXCERPT_CHARS + 1 and long.endswith("…")
    assert error_excerpt(b"\xff\xfe not utf-8", None).endswith("not utf-8")


@pytest.mark.parametrize("make", ["extractor", "rewriter", "embedder"])
def test_every_upstream_client_checks_its_endpoint_and_key_alike(make: str) -> None:
    """The three clients share one endpoint check: a bad URL or a key that cannot go into a
    header is refused when the client is made, naming the setting and never the key."""
    build = _CLIENTS[make]
    with pytest.raises(KememError, match=r"expected http\(s\)://host"):
        build("ftp://example.org/v1", None)
    with pytest.raises(KememError) as err:
        build("http://127.0.0.1:9/v1", "sk-ｓecret")  # a full-width letter
    assert "printable ASCII" in str(err.value) and "ｓecret" not in str(err.value)


@pytest.mark.parametrize("make", ["extractor", "rewriter", "embedder"])
def test_every_upstream_client_keeps_its_url_out_of_info_logs(make: str) -> None:
    """httpx logs each request's URL at INFO, query string (an ``api-key``) and all: every
    client quiets it, and says where it talks without credentials or query."""
    logging.getLogger("httpx").setLevel(logging.NOTSET)
    client = _CLIENTS[make]("http://user:pw@127.0.0.1:9/v1?api-key=SECRET", None)
    assert logging.getLogger("httpx").getEffectiveLevel() >= logging.WARNING
    assert "SECRET" not in client.where and "pw" not in client.where
    assert "api-key=SECRET" in str(client.url)  # the request itself keeps it


_CLIENTS: dict[str, Callable[[str, str | None], Any]] = {
    "extractor": lambda url, key: OpenAIExtractor(url, "m", api_key=key, prompt="p"),
    "rewriter": lambda url, key: Rewriter(url, "m", api_key=key),
    "embedder": lambda url, key: RemoteEmbedder(url, "m", api_key=key, dim=8),
}
