"""The model's answer → validated record data, or an ExtractionError naming every problem."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from kemem_es.errors import ExtractionError
from kemem_es.memory.extract.base import Extraction
from kemem_es.memory.extract.judge import Judgement, read_judgement
from kemem_es.models import EntityRecord, EventRecord

EVENT_FIELDS = ("description", "deepinsight", "keywords", "place", "scene", "time")
ENTITY_FIELDS = ("entity_name", "entity_type", "kind", "keyword", "description", "slot")
JUDGE_FIELDS = ("action", "target")  # extract.judge: not record fields
MAX_ITEMS = 100
"""More events or entities than this from one dialogue is a runaway answer, not memories."""
_SCOPE_PLACEHOLDER = "-"  # validation needs an agent_id; it never leaves this module


_THINK = re.compile(r"<think>.*?</think>", re.S)
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?```$", re.S)


def answer_text(body: Any) -> tuple[str, str | None]:
    """The assistant text of a chat-completions response body, and its finish_reason."""
    choices = body.get("choices") if isinstance(body, Mapping) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ExtractionError("the extractor's answer has no choices (no text came back)")
    choice = choices[0]
    finish = choice.get("finish_reason")
    message = choice.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        content = "".join(
            p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"
        )
    if not isinstance(content, str) or not content.strip():
        why = "a refusal" if isinstance(message, Mapping) and message.get("refusal") else "empty"
        raise ExtractionError(f"the extractor's answer is {why} (finish_reason={finish})")
    return content, finish if isinstance(finish, str) else None


def _strip_wrapping(text: str) -> str:
    """Reasoning blocks and a Markdown code fence around the JSON are tolerated."""
    text = _THINK.sub("", text).strip()
    fenced = _FENCE.match(text)
    return fenced.group(1).strip() if fenced else text


def _loads(text: str, finish: str | None) -> Any:
    text = _strip_wrapping(text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        first, last = text.find("{"), text.rfind("}")
        if 0 <= first < last and (first, last) != (0, len(text) - 1):
            try:  # a sentence around the object (models without JSON mode do this)
                return json.loads(text[first : last + 1])
            except json.JSONDecodeError:
                pass
        cut = " — the answer was cut off (finish_reason=length)" if finish == "length" else ""
        raise ExtractionError(
            f"the extractor's answer is not JSON: {exc.msg} at line {exc.lineno} column "
            f"{exc.colno}{cut}"
        ) from None


def _problems(exc: ValidationError, where: str, renames: Mapping[str, str]) -> list[str]:
    out = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        if loc:
            loc[0] = renames.get(loc[0], loc[0])
        name = ".".join(loc)
        out.append(f"{where}.{name}: {err['msg']}" if name else f"{where}: {err['msg']}")
    return out


def _aware(v: datetime, now: datetime) -> datetime:
    """A time the model wrote without an offset is in the zone of the ``now`` it was told."""
    return v.replace(tzinfo=now.tzinfo) if v.tzinfo is None and now.tzinfo is not None else v


def _items(answer: Mapping[str, Any], key: str) -> tuple[list[Any], list[str]]:
    items = answer.get(key)
    if items is None:
        return [], []
    if not isinstance(items, list):
        return [], [f"{key}: expected a list, got {type(items).__name__}"]
    if len(items) > MAX_ITEMS:
        return [], [f"{key}: {len(items)} items; at most {MAX_ITEMS} from one dialogue"]
    return items, []


def parse_extraction(
    text: str,
    *,
    now: datetime,
    finish_reason: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Extraction:
    """The model's answer → validated record data, or ExtractionError naming every problem.

    Events: ``time`` → ``created_at`` (``now`` when missing or null). Entities: ``updatetime``
    = ``now``. Exact duplicates within one answer are kept once. ``labels``: the candidate
    memories shown to the model (label → memory id, ``extract.judge``): each entity's
    ``action`` / ``target`` is validated against them. An answer nested past Python's
    recursion limit is an ExtractionError too (the upstream's fault, not the caller's: never
    a bare RecursionError)."""
    try:
        return _parse(text, now, finish_reason, labels)
    except RecursionError:
        raise ExtractionError("the extractor's answer is nested too deeply") from None


def _parse(
    text: str, now: datetime, finish_reason: str | None, labels: Mapping[str, str] | None
) -> Extraction:
    answer = _loads(text, finish_reason)
    if not isinstance(answer, dict):
        raise ExtractionError(
            f"the extractor's answer is a JSON {type(answer).__name__}; expected an object "
            '{"events": [...], "entities": [...]}'
        )
    if "events" not in answer and "entities" not in answer:
        raise ExtractionError(
            "the extractor's answer has neither 'events' nor 'entities' "
            f"(keys: {', '.join(str(k)[:40] for k in list(answer)[:10]) or 'none'})"
        )
    ignored = [str(k) for k in answer if k not in ("events", "entities")]
    problems: list[str] = []
    now_text = now.isoformat()
    events = _read_events(answer, now, now_text, problems, ignored)
    entities, judged = _read_entities(answer, now_text, labels, problems, ignored)

    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ExtractionError(
            f"the extractor's answer is not valid memory JSON: {problems[0]}{more}; "
            "nothing was stored",
            problems,
        )
    # A last check on exactly what is handed out: the record models, as the writer will see it.
    for data in events.values():
        EventRecord.model_validate({"agent_id": _SCOPE_PLACEHOLDER, **data})
    for data in entities.values():
        EntityRecord.model_validate({"agent_id": _SCOPE_PLACEHOLDER, **data})
    return Extraction(list(events.values()), list(entities.values()), ignored, judged)


def _read_events(
    answer: dict[str, Any], now: datetime, now_text: str, problems: list[str], ignored: list[str]
) -> dict[str, dict[str, Any]]:
    """The answer's events as record data, by memory id (the first of a repeated one); what
    is wrong goes to ``problems``, unknown fields to ``ignored``."""
    events: dict[str, dict[str, Any]] = {}
    raw_events, bad = _items(answer, "events")
    problems += bad
    for i, item in enumerate(raw_events):
        where = f"events[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected an object, got {type(item).__name__}")
            continue
        ignored += [f"{where}.{k}" for k in item if k not in EVENT_FIELDS]
        # null for an optional field means "not said": the record's default
        data = {k: v for k, v in item.items() if k in EVENT_FIELDS[:-1] and v is not None}
        if isinstance(data.get("keywords"), list):  # ["火锅", ""] → ["火锅"]
            data["keywords"] = [k for k in data["keywords"] if not isinstance(k, str) or k.strip()]
        when = item.get("time")
        data["created_at"] = now_text if when is None or when == "" else when
        try:
            record = EventRecord(agent_id=_SCOPE_PLACEHOLDER, **data)
        except ValidationError as exc:
            problems += _problems(exc, where, {"created_at": "time"})
            continue
        assert record.created_at is not None
        out = {
            "description": record.description,
            "deepinsight": record.deepinsight,
            "keywords": record.keywords,
            "place": record.place,
            "scene": record.scene,
            "created_at": _aware(record.created_at, now).isoformat(),
        }
        events.setdefault(record.memory_id(), out)
    return events


def _read_entities(
    answer: dict[str, Any], now_text: str, labels: Mapping[str, str] | None,
    problems: list[str], ignored: list[str],
) -> tuple[dict[str, dict[str, Any]], list[Judgement | None]]:  # fmt: skip
    """The answer's entities as record data, by memory id, with each one's judgement (the
    judge's fields); what is wrong goes to ``problems``, unknown fields to ``ignored``."""
    entities: dict[str, dict[str, Any]] = {}
    judged: list[Judgement | None] = []
    raw_entities, bad = _items(answer, "entities")
    problems += bad
    for i, item in enumerate(raw_entities):
        where = f"entities[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected an object, got {type(item).__name__}")
            continue
        ignored += [f"{where}.{k}" for k in item if k not in (*ENTITY_FIELDS, *JUDGE_FIELDS)]
        data = {k: v for k, v in item.items() if k in ENTITY_FIELDS and v is not None}
        judgement, bad = read_judgement(item, where, labels or {})
        problems += bad
        try:
            entity = EntityRecord(agent_id=_SCOPE_PLACEHOLDER, updatetime=now_text, **data)
        except ValidationError as exc:
            problems += _problems(exc, where, {})
            continue
        out = {f: getattr(entity, f) for f in ENTITY_FIELDS} | {"updatetime": now_text}
        if out.get("slot") is None:
            out.pop("slot")
        if entity.memory_id() not in entities:
            entities[entity.memory_id()] = out
            judged.append(judgement)
    return entities, judged
