"""The server's OpenAPI description, written for client generators (openapi-typescript,
openapi-generator, oapi-codegen): operation ids that read as method names, the real error body
``{"error": {code, message, field, problems}}`` for every status a route can answer, a bearer
security scheme. ``docs/openapi.json`` is this output, committed; a test fails when it drifts:

    python -m kemem_es.server.openapi > docs/openapi.json
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from fastapi import FastAPI
    from fastapi.routing import APIRoute


class ErrorDetail(BaseModel):
    """What went wrong. ``code`` is stable (match on it); ``message`` is for people."""

    model_config = ConfigDict(extra="allow")

    code: str = Field(
        description="invalid_input, unauthorized, forbidden, not_found, conflict, "
        "confirmation_required, unsupported_media_type, too_large, body_timeout, overloaded, "
        "engine_unavailable, not_configured, extraction_failed, upstream_unavailable, "
        "internal, …",
        examples=["invalid_input"],
    )
    message: str = Field(description="one line, in English")
    field: str | None = Field(
        None, description="the request field (or header, query parameter) at fault, when one is"
    )
    problems: list[str] | None = Field(
        None, description="every problem found (422 with more than one), `field: why` each"
    )
    would_delete: int | None = Field(
        None, description="confirmation_required (400): how many memories the call would delete"
    )


class ErrorBody(BaseModel):
    """Every error the server answers, whatever its status."""

    error: ErrorDetail


# What each status means on this server (the response's description in the schema).
STATUS_TEXT = {
    400: "Bad request: confirmation_required (a delete-all without confirm), invalid_host "
    "(keyless server, a Host header that is not localhost or an address), incomplete_body",
    401: "unauthorized: the server has API keys and the request has none, or an unknown one",
    403: "forbidden: the API key may not serve this agent_id",
    404: "not_found: no such memory in this scope (or no such route)",
    408: "body_timeout: the request body did not arrive in time",
    409: "conflict (other writers kept winning: retry, see Retry-After) or mapping_conflict",
    413: "too_large: the request body is over the server's limit",
    415: "unsupported_media_type: a body must be sent with Content-Type: application/json",
    422: "invalid_input: a field is missing, of the wrong type or out of range (field names "
    "it; problems lists every one), or not_configured (infer without an extractor)",
    429: "overloaded: too many requests in flight (see Retry-After)",
    500: "internal: an unexpected error (the server's log has it, under the request id)",
    502: "extraction_failed: the extractor's LLM failed (infer=true)",
    503: "engine_unavailable: the search engine is down, slow or its indices are missing "
    "(the proxy: proxy_not_configured, no KEMEM_PROXY_UPSTREAM_URL)",
    504: "upstream_timeout: the upstream model did not answer in time",
}

_BODY_METHODS = {"post", "put", "patch"}
# Statuses a route answers beyond the ones every route shares, by operation id.
ROUTE_STATUSES: dict[str, tuple[int, ...]] = {
    "healthz": (),
    "readyz": (401,),
    "query": (401, 403, 503),
    "querySimple": (401, 403, 503),
    "search": (401, 403, 503),
    "addMemories": (401, 403, 409, 502, 503),
    "listMemories": (401, 403, 422, 503),
    "deleteAllMemories": (400, 401, 403, 422, 503),
    "getMemory": (401, 403, 404, 422, 503),
    "updateMemory": (401, 403, 404, 409, 503),
    "deleteMemory": (401, 403, 404, 409, 422, 503),
    "getMemoryHistory": (401, 403, 404, 422, 503),
    # the proxy: besides these, the upstream's own error statuses pass through as it sent them
    "chatCompletions": (401, 403, 502, 503, 504),
    "responses": (401, 403, 404, 502, 503, 504),
    "proxyUsage": (401, 403, 422),
}
# A route not listed above (added later): the statuses a scoped engine route can answer.
DEFAULT_STATUSES = (401, 403, 404, 409, 422, 503)


# Routes whose function name alone would be a vague method name.
RENAMED = {
    ("GET", "/v1/sessions/{session_id}/messages"): "listSessionMessages",
    ("GET", "/v1/sessions/{session_id}/messages/{seq}"): "getSessionMessage",
    ("POST", "/v1/sessions/{session_id}/end"): "endSession",
    ("DELETE", "/v1/sessions/{session_id}"): "deleteSession",
}


def operation_id(route: APIRoute) -> str:
    """The route's function name in lowerCamelCase (``list_memories`` → ``listMemories``): the
    name a generated client's method gets. A route can set its own with ``operation_id``."""
    for method in route.methods or ():
        if (method, route.path) in RENAMED:
            return RENAMED[(method, route.path)]
    head, *rest = route.name.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def _statuses(op_id: str, method: str, path: str) -> list[int]:
    if op_id == "healthz":
        return [400]
    found = {400, 429, 500, *ROUTE_STATUSES.get(op_id, DEFAULT_STATUSES)}
    if method in _BODY_METHODS:
        found |= {408, 413, 415, 422}
    if path.startswith("/readyz"):
        found -= {429}
    return sorted(found)


def _refs(node: Any) -> set[str]:
    """The component schemas ``node`` refers to, directly."""
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                found.add(ref.rsplit("/", 1)[1])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _closure(names: set[str], schemas: dict[str, Any]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen or name not in schemas:
            continue
        seen.add(name)
        todo.extend(_refs(schemas[name]))
    return seen


def answers_always_have_their_defaults(schema: dict[str, Any]) -> None:
    """In the schemas only answers use, a property that cannot be null is required: the
    server always sends it (an answer drops only null fields), and a generated client should
    not make its reader check for it. Request schemas keep such fields
    optional (the server fills the default)."""
    schemas = schema.get("components", {}).get("schemas", {})
    sent: set[str] = set()
    answered: set[str] = set()
    for ops in schema.get("paths", {}).values():
        for op in ops.values():
            sent |= _refs(op.get("requestBody", {})) | _refs(op.get("parameters", []))
            answered |= _refs(op.get("responses", {}))
    only_answers = _closure(answered, schemas) - _closure(sent, schemas)
    for name in only_answers:
        sub = schemas[name]
        props = sub.get("properties", {})
        required = list(sub.get("required", []))
        for prop, spec in props.items():
            nullable = spec.get("default", 0) is None or {"type": "null"} in spec.get("anyOf", [])
            if prop not in required and not nullable:
                required.append(prop)
        if required:
            sub["required"] = required


def describe_errors(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every operation's error statuses answering :class:`ErrorBody`
    (replacing FastAPI's ``{detail: [...]}`` 422, which this server never sends), the bearer
    scheme, and FastAPI's unused validation models removed."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for name, model in (("ErrorBody", ErrorBody), ("ErrorDetail", ErrorDetail)):
        sub = model.model_json_schema(ref_template="#/components/schemas/{model}")
        sub.pop("$defs", None)
        schemas[name] = sub
    ref = {"$ref": "#/components/schemas/ErrorBody"}
    for path, ops in schema.get("paths", {}).items():
        for method, op in ops.items():
            responses = op.setdefault("responses", {})
            for status in _statuses(op.get("operationId", ""), method, path):
                own = responses.get(str(status))
                if own and "content" in own and status != 422:
                    continue  # the route documents it itself (readyz's 503)
                responses[str(status)] = {
                    "description": (own or {}).get("description") or STATUS_TEXT[status],
                    "content": {"application/json": {"schema": ref}},
                }
    components["securitySchemes"] = {
        "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "a key of KEMEM_SERVER_API_KEYS (not needed on a keyless server)",
        }
    }
    schema["security"] = [{"bearer": []}, {}]
    answers_always_have_their_defaults(schema)
    return schema


def install(app: FastAPI) -> None:
    """``app.openapi()`` returns :func:`describe_errors`'s schema (built once)."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe_errors(plain())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def current_schema() -> dict[str, Any]:
    """The schema of a server built with default settings (nothing is connected)."""
    from kemem_es.async_kemem import AsyncKemem
    from kemem_es.config import Settings
    from kemem_es.server.app import create_app

    settings = Settings(server_api_keys=None)
    return create_app(AsyncKemem(settings), settings, close=False).openapi()


def dumps(schema: dict[str, Any]) -> str:
    return json.dumps(schema, ensure_ascii=False, indent=2) + "\n"


def main() -> None:
    sys.stdout.write(dumps(current_schema()))


if __name__ == "__main__":
    main()
