"""``AsyncKemem``: the same verbs as :class:`Kemem`, awaitable, on the official async engine
clients (AsyncOpenSearch / AsyncElasticsearch).

There is no second implementation: each verb runs Kemem's own code through a bridge (see
``runtime.py``) that awaits every engine call on the caller's event loop and runs the CPU
stages (jieba, the ONNX model) in the loop's thread pool. Needs the ``async`` extra (aiohttp).

>>> async with AsyncKemem() as km:
...     resp = await km.search("我那只狗最近好像胖了", user_id="u_xiaoman", agent_id="lishen")
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from kemem_es.config import Settings
from kemem_es.kemem import Kemem
from kemem_es.memory.hooks import Hooks
from kemem_es.runtime import AwaitingClient, Bridge

P = ParamSpec("P")
T = TypeVar("T")


def _awaitable(
    verb: Callable[Concatenate[Kemem, P], T],
) -> Callable[Concatenate[AsyncKemem, P], Coroutine[None, None, T]]:
    """``AsyncKemem.<verb>``: Kemem's verb of that name run through the bridge, with its
    arguments and result type (so a type checker and an editor see the real signature)."""
    name = verb.__name__

    @functools.wraps(verb)
    async def call(self: AsyncKemem, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._bridge.run(getattr(self.core, name), *args, **kwargs)

    call.__doc__ = f"Awaitable ``Kemem.{name}``. " + (verb.__doc__ or "")
    return call


def _delegated(
    verb: Callable[Concatenate[Kemem, P], T],
) -> Callable[Concatenate[AsyncKemem, P], T]:
    """``AsyncKemem.<verb>``: Kemem's verb of that name, called as it is (nothing to await)."""
    name = verb.__name__

    @functools.wraps(verb)
    def call(self: AsyncKemem, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return getattr(self.core, name)(*args, **kwargs)

    return call


class AsyncKemem:
    """Build it anywhere; it connects on the first awaited call, on that call's event loop
    (use one instance per loop). ``aclose()`` (or ``async with``) flushes background work and
    closes the engine client."""

    def __init__(self, settings: Settings | None = None, **overrides: Any) -> None:
        self._bridge = Bridge()
        self.core = Kemem(settings, bridge=self._bridge, **overrides)

    @property
    def settings(self) -> Settings:
        return self.core.settings

    @property
    def hooks(self) -> Hooks:
        """before_write / after_search hooks; ``async def`` hooks are awaited on the loop."""
        return self.core.hooks

    @property
    def extraction_errors(self) -> list[Exception]:
        """The latest background extractions that failed (``infer="background"``)."""
        return self.core.extraction_errors

    @property
    def extraction_failures(self) -> int:
        """How many background extractions failed since start (the ``/metrics`` counter)."""
        return self.core.extraction_failures

    async def aclose(self, extraction_timeout_s: float | None = None) -> None:
        """Finish background extractions (see ``Kemem.close``) and reinforcement, then close
        the client."""
        # In a worker thread: the background writers' engine calls are carried by this loop.
        await asyncio.to_thread(self.core.close, extraction_timeout_s)
        engine = self.core.__dict__.get("engine")
        if engine is not None and isinstance(engine.client, AwaitingClient):
            await engine.client.close()

    async def __aenter__(self) -> AsyncKemem:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # The prompt text is pure formatting: nothing to await.
    prompt = _delegated(Kemem.prompt)

    # Kemem's verbs, awaitable, with the same arguments and results.
    query = _awaitable(Kemem.query)
    query_simple = _awaitable(Kemem.query_simple)
    prepare_context = _awaitable(Kemem.prepare_context)
    calibrate = _awaitable(Kemem.calibrate)
    search = _awaitable(Kemem.search)
    add = _awaitable(Kemem.add)
    get = _awaitable(Kemem.get)
    get_all = _awaitable(Kemem.get_all)
    update = _awaitable(Kemem.update)
    delete = _awaitable(Kemem.delete)
    delete_all = _awaitable(Kemem.delete_all)
    count = _awaitable(Kemem.count)
    history = _awaitable(Kemem.history)
    stats = _awaitable(Kemem.stats)
    repair_history = _awaitable(Kemem.repair_history)
    cleanup = _awaitable(Kemem.cleanup)
    init = _awaitable(Kemem.init)
    index_file = _awaitable(Kemem.index_file)
    index_records = _awaitable(Kemem.index_records)
    index_demo = _awaitable(Kemem.index_demo)
    warm_up = _awaitable(Kemem.warm_up)
    readiness = _awaitable(Kemem.readiness)
    flush = _awaitable(Kemem.flush)
    drain = _awaitable(Kemem.drain)
    # conversation sessions (docs/sessions.md)
    context = _awaitable(Kemem.context)
    end_session = _awaitable(Kemem.end_session)
    session_messages = _awaitable(Kemem.session_messages)
    session_message = _awaitable(Kemem.session_message)
    list_sessions = _awaitable(Kemem.list_sessions)
    delete_session = _awaitable(Kemem.delete_session)
    resume_sessions = _awaitable(Kemem.resume_sessions)
