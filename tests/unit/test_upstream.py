"""The one scrub of an upstream error body (kemem_es/upstream.py), used by the extractor and the
remote embedder alike."""

from __future__ import annotations

import json

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
