"""The proxy's per-app state: the upstream HTTP client, the turns and records being written in
the background, the response chains and the usage counts (``durable.py``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

from kemem_es.server.proxy.durable import Chains, UsageBook

log = logging.getLogger("kemem_es.server.proxy")
SHUTDOWN_WAIT_S = 10.0  # at shutdown: the turns and records still being written


@dataclass
class ProxyState:
    client: Any = None
    chains: Chains = field(default_factory=Chains)
    usage: UsageBook = field(default_factory=UsageBook)
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    def background(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """``work`` after the answer went out; a failure is logged (the answer stands)."""

        async def guarded() -> None:
            try:
                await work
            except Exception as exc:
                log.warning("proxy: %s failed: %s", what, type(exc).__name__)

        task = asyncio.ensure_future(guarded())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


def state(request: Request) -> ProxyState:
    app = request.app
    if not hasattr(app.state, "proxy"):
        app.state.proxy = ProxyState()
    return app.state.proxy


async def close_proxy(app: Any) -> None:
    """At shutdown: the turns and records being written, the usage counts, then the client."""
    st: ProxyState | None = getattr(app.state, "proxy", None)
    if st is None:
        return
    if st.tasks:
        await asyncio.wait(set(st.tasks), timeout=SHUTDOWN_WAIT_S)
    writing = st.usage.task is not None and not st.usage.task.done()
    if st.usage.pending or writing:  # flush() waits for a write under way, then the rest
        try:
            await asyncio.wait_for(st.usage.flush(app.state.kemem), SHUTDOWN_WAIT_S)
        except asyncio.TimeoutError:  # not yet the builtin TimeoutError on Python 3.10
            log.warning("proxy: the usage counts were not written at shutdown")
    if st.client is not None:
        await st.client.aclose()
