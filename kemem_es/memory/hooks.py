"""Processing hooks (the seed's ``process`` interface): the operator's own code at two points.

- ``before_write(record, ctx) -> record | None``: transform or enrich record data before it is
  validated and written, or reject it by raising :class:`Rejected` (or returning None). On an
  update, ``record`` is the whole new version (stored fields with the changes applied).
- ``after_search(response, ctx) -> response``: filter or re-rank the hits of a query.

Hooks may be plain functions or ``async def``. They run on copies, all of them before anything
is written or returned, so a hook that fails leaves nothing half-applied: the call raises
:class:`HookError` naming the hook and the record, and nothing is written.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kemem_es.errors import InvalidInput, KememError
from kemem_es.runtime import await_here, in_async_call

if TYPE_CHECKING:
    from kemem_es.contract.response import QueryResponse

T = TypeVar("T")
Record = dict[str, Any]
BeforeWrite = Callable[[Record, "HookContext"], "Record | Awaitable[Record | None] | None"]
AfterSearch = Callable[["QueryResponse", "HookContext"], "QueryResponse | Awaitable[QueryResponse]"]


class Rejected(InvalidInput):
    """Raised by a before_write hook to refuse a record (with the reason)."""


class HookError(KememError):
    """A hook failed; nothing was written or returned."""


@dataclass(frozen=True)
class HookContext:
    """Where a hook is called from: the scope and what kind of memory / which query."""

    agent_id: str
    user_id: str | None
    db: str
    kind: str | None = None
    query: str | None = None


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", repr(fn))


def _resolve(value: T | Awaitable[T]) -> T:
    """An async hook's result, awaited here when called from synchronous code."""
    if not inspect.isawaitable(value):
        return value
    if in_async_call():  # AsyncKemem: awaited on its event loop
        return await_here(value)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await(value))
    raise HookError("an async hook was called from a running event loop; use await-able APIs")


async def _await(value: Awaitable[T]) -> T:
    return await value


@dataclass
class Hooks:
    before_write: list[BeforeWrite] = field(default_factory=list)
    after_search: list[AfterSearch] = field(default_factory=list)

    def run_before_write(
        self, records: list[dict[str, Any]], ctx: HookContext, labels: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """Every hook on every record, on copies; any failure raises before anything is kept."""
        if not self.before_write:
            return records
        out = []
        for i, record in enumerate(records):
            label = labels[i] if labels else f"record {i + 1}"
            current = copy.deepcopy(record)
            for hook in self.before_write:
                try:
                    result = _resolve(hook(current, ctx))
                except Rejected as exc:
                    raise Rejected(f"{label}: rejected by {_name(hook)}: {exc}") from None
                except Exception as exc:
                    raise HookError(
                        f"{label}: before_write hook {_name(hook)} failed "
                        f"({type(exc).__name__}: {exc}); nothing was written"
                    ) from exc
                if result is None:
                    raise Rejected(f"{label}: rejected by {_name(hook)}")
                if not isinstance(result, dict):
                    raise HookError(
                        f"{label}: before_write hook {_name(hook)} returned "
                        f"{type(result).__name__}, not the record dict; nothing was written"
                    )
                current = result
            out.append(current)
        return out

    def run_after_search(self, response: QueryResponse, ctx: HookContext) -> QueryResponse:
        current = response
        for hook in self.after_search:
            work = current.model_copy(deep=True)
            try:
                result = _resolve(hook(work, ctx))
            except Exception as exc:
                raise HookError(
                    f"after_search hook {_name(hook)} failed ({type(exc).__name__}: {exc})"
                ) from exc
            if result is None or type(result) is not type(response):
                raise HookError(
                    f"after_search hook {_name(hook)} must return the response it was given"
                )
            current = result
        return current
