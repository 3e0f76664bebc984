"""What ``add`` accepts, turned into record data: a text, chat messages, or a record."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from kemem_es.errors import InvalidInput
from kemem_es.models import MemoryKind, check_utf8, has_visible_text
from kemem_es.store.scope import Scope

Message = Mapping[str, Any]
AddInput = str | Sequence[Message] | Mapping[str, Any] | BaseModel


def utf8_text(text: str, field: str) -> str:
    """``text`` as given, or InvalidInput naming ``field`` when UTF-8 cannot encode it
    (``models.check_utf8``): the text of an add or a query, before it is hashed or searched."""
    try:
        return check_utf8(text)
    except ValueError as exc:
        raise InvalidInput(f"{field}: {exc}", field=field) from None


ROLE_SPEAKERS = {"user": "用户", "assistant": "AI"}  # the extraction prompt's own defaults


def dialogue_lines(
    messages: Sequence[Message | str] | str,
    user_name: str | None = None,
    agent_name: str | None = None,
) -> list[str]:
    """Chat turns as lines ``名字：内容``, in order, each labelled with its speaker (the message's
    ``name``, else ``user_name`` / ``agent_name``, else 用户 / AI): what an added dialogue's
    event text and the extraction prompt's dialogue are made of. A plain string is the user's.
    System turns (a persona prompt) are not dialogue and are left out, as are turns with no
    visible text. Bad messages are the caller's input: InvalidInput naming the message."""
    if isinstance(messages, str):
        messages = [messages]
    if isinstance(messages, Mapping) or not isinstance(messages, Sequence):
        raise InvalidInput(
            "messages: expected a list of {'role': ..., 'content': '...'}", field="messages"
        )
    speakers = {
        "user": user_name or ROLE_SPEAKERS["user"],
        "assistant": agent_name or ROLE_SPEAKERS["assistant"],
    }
    lines = []
    for i, m in enumerate(messages):
        if isinstance(m, str):
            role, name, content = "user", None, m
        elif isinstance(m, Mapping) and isinstance(m.get("content"), str):
            role, name, content = str(m.get("role") or "user"), m.get("name"), m["content"]
        else:
            raise InvalidInput(
                f"messages[{i}]: expected {{'role': ..., 'content': '...'}}",
                field=f"messages[{i}]",
            )
        if role == "system" or not has_visible_text(utf8_text(content, f"messages[{i}].content")):
            continue
        speaker = name.strip() if isinstance(name, str) and name.strip() else None
        lines.append(f"{speaker or speakers.get(role, role)}：{content.strip()}")
    return lines


def join_messages(messages: Sequence[Message | str], names: Mapping[str, str] | None = None) -> str:
    """Chat turns become one event text (``dialogue_lines``), so the memory says whose words
    they are (an unlabelled 「我最喜欢喝冰美式 / 嗯嗯，我记住啦」 left open who 我 was)."""
    names = names or {}
    lines = dialogue_lines(messages, names.get("user_name"), names.get("agent_name"))
    if not lines:
        raise InvalidInput("messages: no text to remember", field="messages")
    return "\n".join(lines)


def to_record_data(
    data: AddInput,
    kind: MemoryKind,
    scope: Scope,
    session_id: str | None,
    metadata: Mapping[str, Any] | None,
    now: datetime,
    names: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Record input with the scope of the call filled in. A record that names another scope
    is refused rather than moved."""
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidInput("metadata: a mapping of keys to values", field="metadata")
    if isinstance(data, BaseModel):
        record = data.model_dump(exclude_unset=True)
    elif isinstance(data, Mapping) and "role" not in data:
        record = dict(data)
    elif isinstance(data, bytes | bytearray):
        raise InvalidInput("data: bytes; decode the text to str first", field="data")
    elif isinstance(data, str | Sequence | Mapping):
        if kind != "events":
            raise InvalidInput(
                "kind: plain text or messages become an event; an entity needs a record with "
                "entity_name, entity_type, kind and description",
                field="kind",
            )
        text = (
            data
            if isinstance(data, str)
            else join_messages([data] if isinstance(data, Mapping) else list(data), names)
        )
        if not has_visible_text(utf8_text(text, "text")):
            raise InvalidInput("text: no text to remember", field="text")
        # Identified by its text alone: the same words said again are the same memory (NOOP),
        # whenever they are said.
        digest = hashlib.sha1(text.strip().encode()).hexdigest()[:24]
        record = {"id": f"t{digest}", "description": text, "created_at": now}
    else:
        raise InvalidInput(f"data: cannot remember a {type(data).__name__}", field="data")
    for name, value in (("agent_id", scope.agent_id), ("user_id", scope.user_id)):
        given = record.get(name)
        if given not in (None, "", value):
            raise InvalidInput(
                f"{name}: the record says {given!r} but the call's scope is {value!r}",
                field=name,
            )
        record[name] = value
    if session_id is not None:
        record["session_id"] = session_id
    if metadata:
        record["metadata"] = {**(record.get("metadata") or {}), **metadata}
    return record
