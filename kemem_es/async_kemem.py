"""``AsyncKemem``: the same verbs as :class:`Kemem`, awaitable, on the official async engine
clients (AsyncOpenSearch / AsyncElasticsearch).

There is no second implementation: each verb runs Kemem's own code through a bridge (see
``engine/bridge.py``) that awaits every engine call on the caller's event loop and runs the CPU
stages (jieba, the ONNX model) in the loop's thread pool. Needs the ``async`` extra (aiohttp).

>>> async with AsyncKemem() as km:
...     resp = await km.search("我那只狗最近好像胖了", user_id="u_xiaoman", agent_id="lishen")
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any

from kemem_es.config import Settings
from kemem_es.engine.bridge import AwaitingClient, Bridge
from kemem_es.kemem import Kemem
from kemem_es.memory.hooks import Hooks

# Kemem's verbs that AsyncKemem offers awaitable, with the same arguments and results.
VERBS: tuple[str, ...] = (
    "query",
    "query_simple",
    "search",
    "add",
    "get",
    "get_all",
    "update",
    "delete",
    "delete_all",
    "count",
    "history",
    "stats",
    "cleanup",
    "init",
    "index_file",
    "index_records",
    "index_demo",
    "warm_up",
    "readiness",
    "flush",
    "drain",
)


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

    @functools.wraps(Kemem.prompt)
    def prompt(self, *args: Any, **kwargs: Any) -> str:
        """SPEC §5 prompt text: pure formatting, nothing to await (see ``Kemem.prompt``)."""
        return self.core.prompt(*args, **kwargs)

    async def aclose(self) -> None:
        """Finish background extractions and reinforcement, then close the client."""
        # In a worker thread: the background writers' engine calls are carried by this loop.
        await asyncio.to_thread(self.core.close)
        engine = self.core.__dict__.get("engine")
        if engine is not None and isinstance(engine.client, AwaitingClient):
            await engine.client.close()

    async def __aenter__(self) -> AsyncKemem:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _awaitable(name: str) -> Callable[..., Coroutine[Any, Any, Any]]:
    """``AsyncKemem.<name>``: Kemem's verb of that name, run through the bridge."""
    verb = getattr(Kemem, name)

    @functools.wraps(verb)
    async def call(self: AsyncKemem, *args: Any, **kwargs: Any) -> Any:
        return await self._bridge.run(getattr(self.core, name), *args, **kwargs)

    call.__doc__ = f"Awaitable ``Kemem.{name}``. " + (verb.__doc__ or "")
    return call


for _name in VERBS:
    setattr(AsyncKemem, _name, _awaitable(_name))
