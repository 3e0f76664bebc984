"""Filters over memories: a small language compiled into engine query clauses.

Shape (JSON-friendly, the same in ``search``, ``get_all`` and ``delete_all``)::

    {"session_id": "s1"}                                 # equality
    {"strength": {"gte": 10}, "place": {"in": ["家", "公司"]}}   # several keys: all must hold
    {"metadata.mood": {"ne": "sad"}}                     # metadata keys: "metadata.<key>"
    {"or": [{...}, {...}]}, {"and": [...]}, {"not": {...}}

Operators: eq, ne, in, nin, gt, gte, lt, lte, exists. Built-in fields and their types are in
FIELDS; ``ne``/``nin`` also match memories that lack the field. Metadata values are typed by
their JSON type (see ``store.documents.meta_entries``): a filter's value type picks the typed
field it is matched against, so ``{"metadata.n": {"gt": 3}}`` compares numbers and
``{"metadata.day": {"gte": "2025-06-01"}}`` compares dates. An unknown field or operator, or a
value of the wrong type, is an InvalidInput naming it; nothing is silently ignored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Literal

from kemem_es.errors import InvalidInput
from kemem_es.models import META_KEY, check_utf8, parse_time

FieldType = Literal["keyword", "number", "date"]

FIELDS: dict[str, tuple[str, FieldType]] = {
    "session_id": ("session_id", "keyword"),
    "kind": ("kind", "keyword"),  # an entity's kind (用户属性, 记忆画面, ...)
    "entity_type": ("entity_type", "keyword"),
    "entity_name": ("entity_name", "keyword"),
    "keyword": ("keyword", "keyword"),
    "keywords": ("keywords", "keyword"),
    "place": ("place", "keyword"),
    "scene": ("scene", "keyword"),
    "user_name": ("user_name", "keyword"),
    "agent_name": ("agent_name", "keyword"),
    "created_at": ("created_at", "date"),
    "updatetime": ("updatetime", "date"),
    "last_recalled_at": ("last_recalled_at", "date"),
    "strength": ("strength", "number"),
    "recall_count": ("recall_count", "number"),
}
OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "exists")
RANGE_OPS = ("gt", "gte", "lt", "lte")
META_PREFIX = "metadata."
MAX_DEPTH = 8
INT64 = 2**63  # the engine's long; the client cannot even encode an integer beyond it


def _bad(path: str, message: str) -> InvalidInput:
    return InvalidInput(f"filters.{path}: {message}", field=f"filters.{path}")


def compile_filters(filters: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Engine filter clauses for ``filters`` (an empty list for none)."""
    if not filters:
        return []
    if not isinstance(filters, Mapping):
        raise InvalidInput("filters: must be an object", field="filters")
    return [_node(filters, "", 0)]


def _node(node: Any, path: str, depth: int) -> dict[str, Any]:
    if depth > MAX_DEPTH:
        raise _bad(path or "(root)", f"nested deeper than {MAX_DEPTH} levels")
    if not isinstance(node, Mapping) or not node:
        raise _bad(path or "(root)", "a filter is a non-empty object")
    clauses: list[dict[str, Any]] = []
    for key, value in node.items():
        where = f"{path}.{key}" if path else key
        if key in ("and", "or"):
            if not isinstance(value, list) or not value:
                raise _bad(where, "takes a non-empty list of filters")
            parts = [_node(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
            if key == "and":
                clauses.append({"bool": {"filter": parts}})
            else:
                clauses.append({"bool": {"should": parts, "minimum_should_match": 1}})
        elif key == "not":
            clauses.append({"bool": {"must_not": [_node(value, where, depth + 1)]}})
        else:
            clauses.append(_field_clause(key, value, where))
    return clauses[0] if len(clauses) == 1 else {"bool": {"filter": clauses}}


def _field_clause(name: str, spec: Any, where: str) -> dict[str, Any]:
    if not isinstance(spec, Mapping):
        spec = {"eq": spec}
    if not spec:
        raise _bad(where, "needs an operator")
    parts = []
    for op, value in spec.items():
        if op not in OPERATORS:
            raise _bad(where, f"unknown operator {op!r} (use {', '.join(OPERATORS)})")
        if name.startswith(META_PREFIX):
            parts.append(_meta_clause(name[len(META_PREFIX) :], op, value, f"{where}.{op}"))
        elif name in FIELDS:
            field, ftype = FIELDS[name]
            parts.append(_builtin_clause(field, ftype, op, value, f"{where}.{op}"))
        else:
            raise _bad(
                where,
                f"unknown field {name!r} (use {', '.join(FIELDS)} or metadata.<key>)",
            )
    return parts[0] if len(parts) == 1 else {"bool": {"filter": parts}}


def _number(value: int | float, where: str) -> int | float:
    """A number the engine can compare: finite (NaN compares with nothing, yet the engine
    matched all) and, for an integer, within the signed 64-bit range."""
    if isinstance(value, float) and not math.isfinite(value):
        raise _bad(where, f"expects a finite number, got {value}")
    if isinstance(value, int) and not -INT64 <= value < INT64:
        raise _bad(where, "integer beyond the signed 64-bit range (±9.2e18)")
    return value


def _text(value: str, where: str) -> str:
    try:
        return check_utf8(value)
    except ValueError as exc:
        raise _bad(where, str(exc)) from None


def _check_value(ftype: FieldType, value: Any, where: str) -> Any:
    if ftype == "keyword":
        # Text only: a number matched as its digits ({"kind": {"ne": 1}} was every memory)
        # hid the caller's mistake.
        if not isinstance(value, str):
            raise _bad(where, f"expects text, got {type(value).__name__}")
        return _text(value, where)
    if ftype == "number":
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _bad(where, f"expects a number, got {type(value).__name__}")
        return _number(value, where)
    try:
        return str(parse_time(value)).replace(" ", "T")
    except ValueError as exc:
        raise _bad(where, str(exc)) from None


def _values(op: str, value: Any, where: str) -> list[Any]:
    if op in ("in", "nin"):
        if not isinstance(value, list) or not value:
            raise _bad(where, "expects a non-empty list")
        return value
    if isinstance(value, list | dict):
        raise _bad(where, "expects one value")
    return [value]


def _builtin_clause(
    field: str, ftype: FieldType, op: str, value: Any, where: str
) -> dict[str, Any]:
    if op == "exists":
        if not isinstance(value, bool):
            raise _bad(where, "expects true or false")
        exists = {"exists": {"field": field}}
        return exists if value else {"bool": {"must_not": [exists]}}
    values = [_check_value(ftype, v, where) for v in _values(op, value, where)]
    if op in RANGE_OPS:
        if ftype == "keyword":
            raise _bad(where, f"{op} needs a number or date field")
        return {"range": {field: {op: values[0]}}}
    match = {"terms": {field: values}} if op in ("in", "nin") else {"term": {field: values[0]}}
    return {"bool": {"must_not": [match]}} if op in ("ne", "nin") else match


def _meta_clause(key: str, op: str, value: Any, where: str) -> dict[str, Any]:
    if not META_KEY.match(key):  # a dotted key (metadata.a.b) can never match: keys are flat
        raise _bad(where, f"metadata key {key!r}: 1–64 letters, digits, _ or - (no dots)")
    has_key: dict[str, Any] = {"term": {"meta.key": key}}
    if op == "exists":
        if not isinstance(value, bool):
            raise _bad(where, "expects true or false")
        nested = {"nested": {"path": "meta", "query": has_key}}
        return nested if value else {"bool": {"must_not": [nested]}}
    values = _values(op, value, where)
    if op in RANGE_OPS:
        v = values[0]
        if isinstance(v, bool) or not isinstance(v, int | float | str):
            raise _bad(where, "expects a number or a date")
        if isinstance(v, str):
            # Imported here: documents → contract → contract.params → this module, so a
            # module-level import works only when contract happens to load first.
            from kemem_es.store.documents import date_value

            # the date sub-field holds what documents.date_value gives, in the same form
            when = date_value(_text(v, where))
            sub, v = ("date", when) if when is not None else ("kw", v)
        else:
            sub, v = "num", _number(v, where)
        cond: dict[str, Any] = {"range": {f"meta.{sub}": {op: v}}}
    else:
        by_field: dict[str, list[Any]] = {}
        for v in values:
            if isinstance(v, bool):
                by_field.setdefault("meta.bool", []).append(v)
            elif isinstance(v, int | float):
                by_field.setdefault("meta.num", []).append(_number(v, where))
            elif isinstance(v, str):
                by_field.setdefault("meta.kw", []).append(_text(v, where))
            else:
                raise _bad(where, f"expects text, a number or true/false, got {type(v).__name__}")
        terms = [{"terms": {f: vs}} for f, vs in by_field.items()]
        cond = terms[0] if len(terms) == 1 else {"bool": {"should": terms}}
    nested = {"nested": {"path": "meta", "query": {"bool": {"filter": [has_key, cond]}}}}
    return {"bool": {"must_not": [nested]}} if op in ("ne", "nin") else nested
