"""Every error leaves the server as ``{"error": {"code", "message", "field"?}}``; never a
traceback. Kemem's error tree maps onto status codes here, once."""

from __future__ import annotations

import logging
import re
import urllib.parse
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from kemem_es.errors import (
    ConcurrentChange,
    EngineUnavailable,
    ExtractionError,
    ExtractorNotConfigured,
    Forbidden,
    InvalidInput,
    KememError,
    MappingConflict,
    NotFound,
)

log = logging.getLogger("kemem_es.server")

# FastAPI's 400 for a body that json.loads could not even finish (nested past the recursion
# limit, not UTF-8); a body that is merely not JSON is a RequestValidationError instead.
_UNPARSABLE_BODY = "There was an error parsing the body"


# What stands for the engine's address in an answer (the log keeps the address).
ENGINE = "<engine>"
LLM = "<llm>"  # the same for the extractor's address (an LLM is no search engine)
# Addresses as the clients' errors quote them, most specific first: a socket's ('host', port),
# urllib3's host='…', port=…, a bracketed IPv6 address, a URL, an IPv4 address.
_ADDRESSES = re.compile(
    r"\(\s*'[^']*'\s*,\s*\d+[^)]*\)"
    r"|\bhost='[^']*'(?:,\s*port=\d+)?"
    r"|\[[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*\](?::\d+)?"
    r"|\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]]+"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"
)


def hide_engine(text: str, engine_url: str | None, placeholder: str = ENGINE) -> str:
    """``text`` without the engine's address (its URL, host and port, any IP address or URL):
    an answer goes to key holders and chat clients, who have no business knowing where the
    engine runs. The library's own messages (and the server's log) keep it."""
    text = _ADDRESSES.sub(placeholder, text)
    host = urllib.parse.urlsplit(engine_url).hostname if engine_url else None
    if host:  # a name, not an address (those went above)
        name = rf"(?<![\w.-]){re.escape(host)}(?::\d+)?(?![\w-])"
        text = re.sub(name, placeholder, text, flags=re.IGNORECASE)
    return text


def public_reason(exc: BaseException, engine_url: str | None) -> str:
    """Why a state check failed, as a status answer shows it: the first line, without the
    engine's address, at most 300 characters (the exception's type when there is no text)."""
    return hide_engine(str(exc).split("\n")[0], engine_url)[:300] or type(exc).__name__


class ApiError(Exception):
    """An error the server itself raises (auth, confirmation, limits)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        field: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field
        self.extra = extra or {}


def error_body(code: str, message: str, field: str | None = None, **extra: Any) -> dict:
    err: dict[str, Any] = {"code": code, "message": message}
    if field:
        err["field"] = field
    err.update(extra)
    return {"error": err}


def error_response(
    status: int, code: str, message: str, field: str | None = None, **extra: Any
) -> JSONResponse:
    return JSONResponse(error_body(code, message, field, **extra), status_code=status)


def refusal(
    status: int, code: str, message: str, field: str | None = None, **extra: Any
) -> JSONResponse:
    """An error answered before the request's body was read: the connection is closed after
    it, so the unread rest of the body is never taken for the next request."""
    resp = error_response(status, code, message, field, **extra)
    resp.headers["Connection"] = "close"
    return resp


def _field_of(loc: Sequence[object]) -> str:
    """``("body", "limit")`` → ``limit``; ``("query", "cursor")`` → ``cursor``; ``("body",)``
    (no body at all) → ``body``. Only the first item says where: /query's body field
    ``query`` (``("body", "query")``) is named ``query``, not ``body``."""
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    return ".".join(parts) or "body"


def kemem_error_response(exc: KememError, engine_url: str | None = None) -> JSONResponse:
    """The status and code of ``exc``, with its message less the engine's address (an
    extraction's: less the LLM's; its upstream body is never in the message, see
    ``ExtractionError.detail``)."""
    placeholder = LLM if isinstance(exc, ExtractionError) else ENGINE
    msg = hide_engine(str(exc), engine_url, placeholder)
    if isinstance(exc, InvalidInput):
        extra = {"problems": exc.problems[:20]} if len(exc.problems) > 1 else {}
        return error_response(422, "invalid_input", msg, exc.field, **extra)
    if isinstance(exc, NotFound):
        return error_response(404, "not_found", msg)
    if isinstance(exc, Forbidden):
        return error_response(403, "forbidden", msg, exc.field)
    if isinstance(exc, ConcurrentChange):  # other writers kept winning: worth a retry soon
        resp = error_response(409, "conflict", msg)
        resp.headers["Retry-After"] = "1"
        return resp
    if isinstance(exc, EngineUnavailable):
        return error_response(503, "engine_unavailable", msg)
    if isinstance(exc, ExtractorNotConfigured):  # no upstream to blame: the request asks
        # for what this deployment lacks; the caller can drop infer (not a 502 to retry)
        return error_response(422, "not_configured", msg, "infer")
    if isinstance(exc, ExtractionError):
        return error_response(502, "extraction_failed", msg)
    if isinstance(exc, MappingConflict):
        return error_response(409, "mapping_conflict", msg)
    return error_response(500, "kemem_error", msg)


def _unparsable_body(why: str) -> JSONResponse:
    """Every body that is not usable JSON gets one shape: 422 naming ``body``."""
    return error_response(422, "invalid_input", f"body: not valid JSON ({why})", "body")


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        errs = exc.errors()
        first = errs[0] if errs else {"loc": (), "msg": "invalid request", "type": ""}
        if first.get("type") == "json_invalid":  # its loc is the offset: "0", not a field
            ctx = first.get("ctx")
            return _unparsable_body(str(ctx.get("error") if isinstance(ctx, dict) else "not JSON"))
        field = _field_of(first.get("loc", ()))
        msg = "unknown field" if first.get("type") == "extra_forbidden" else first.get("msg")
        problems = [f"{_field_of(e.get('loc', ()))}: {e.get('msg')}" for e in errs[:20]]
        return error_response(422, "invalid_input", f"{field}: {msg}", field, problems=problems)

    @app.exception_handler(RecursionError)
    async def _deep(_: Request, exc: RecursionError) -> JSONResponse:
        # Input nested past Python's recursion limit somewhere below the checks: the input's
        # fault, not a server error (the filters have their own depth check).
        return error_response(422, "invalid_input", "input nested too deeply")

    @app.exception_handler(KememError)
    async def _kemem(request: Request, exc: KememError) -> JSONResponse:
        return kemem_error_response(exc, request.app.state.kemem.settings.url)

    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.field, **exc.extra)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == _UNPARSABLE_BODY:
            return _unparsable_body("nested too deeply or not UTF-8")
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return error_response(exc.status_code, code, str(exc.detail))
