"""``add``'s messages as session turns (checked before anything is stored)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kemem_es.errors import InvalidInput
from kemem_es.memory.inputs import utf8_text

ROLES = ("user", "assistant")
SKIPPED_ROLES = ("system", "developer", "tool", "function")


def normalise(messages: object) -> list[dict[str, Any]]:
    """``add``'s messages as session turns: a text is the user's; system / tool messages are not
    dialogue and are left out; ``name`` and ``seq`` are kept when given."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    elif isinstance(messages, Mapping):
        messages = [messages]
    if not isinstance(messages, Sequence):
        raise InvalidInput("messages: a text or a list of {role, content}", field="messages")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if isinstance(m, str):
            m = {"role": "user", "content": m}
        if not isinstance(m, Mapping) or not isinstance(m.get("content"), str):
            raise InvalidInput(
                f"messages[{i}]: expected {{'role': ..., 'content': '...'}}", field=f"messages[{i}]"
            )
        role = str(m.get("role") or "user")
        if role in SKIPPED_ROLES:
            continue
        if role not in ROLES:
            raise InvalidInput(
                f"messages[{i}].role: user or assistant, not {role!r}", field=f"messages[{i}].role"
            )
        turn: dict[str, Any] = {
            "role": role,
            "content": utf8_text(m["content"], f"messages[{i}].content"),
        }
        if isinstance(m.get("name"), str) and m["name"].strip():
            turn["name"] = m["name"].strip()
        if m.get("seq") is not None:
            if not isinstance(m["seq"], int) or isinstance(m["seq"], bool) or m["seq"] < 0:
                raise InvalidInput(
                    f"messages[{i}].seq: a whole number ≥ 0", field=f"messages[{i}].seq"
                )
            turn["seq"] = m["seq"]
        out.append(turn)
    if any("seq" in t for t in out) and not all("seq" in t for t in out):
        raise InvalidInput("messages: give seq for every message or for none", field="seq")
    return out
