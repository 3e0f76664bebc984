"""What kemem-es may repeat of an upstream service's error body (an LLM, an embedding
service): a short excerpt, the service's own message when the body is JSON, with the caller's
key and any bearer token masked. One place, so the extractor and the remote embedder scrub
alike; HTTP answers never carry even this (server/errors.py gives a status and a generic
reason), only KememError messages to the Python caller and DEBUG logs do."""

from __future__ import annotations

import json
import re

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
