"""The server's session sweep: at start and then every ``KEMEM_SESSION_SWEEP_S`` seconds it runs
``resume_sessions`` — batches a killed process left open are started again, and every session
idle longer than ``KEMEM_SESSION_IDLE_S`` is ended (its window goes to extraction). Durable and
idempotent by the session store's versioned writes (docs/sessions.md), so several servers over
one cluster may all sweep."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from kemem_es.async_kemem import AsyncKemem
from kemem_es.errors import EngineUnavailable, KememError

log = logging.getLogger("kemem_es.session")

STOP_S = 1.0  # at shutdown, a sweep under way gets this long to finish


class SessionSweeper:
    def __init__(self, km: AsyncKemem, every_s: float) -> None:
        self.km = km
        self.every_s = every_s
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.runs = 0

    def start(self) -> None:
        if self.every_s > 0 and self.task is None:
            self.task = asyncio.create_task(self._run(), name="kemem-session-sweep")

    async def _run(self) -> None:
        while not self.stop.is_set():
            try:
                await self.km.resume_sessions()
            except EngineUnavailable as exc:  # not up yet: the next round tries again
                log.warning("session sweep: engine unavailable: %s", type(exc).__name__)
            except KememError as exc:
                log.warning("session sweep failed: %s: %s", type(exc).__name__, exc)
            except Exception as exc:  # never let the loop die on what it did not foresee
                log.error("session sweep failed: %s", type(exc).__name__, exc_info=exc)
            self.runs += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stop.wait(), self.every_s)

    async def close(self) -> None:
        """Stop; a sweep under way is given ``STOP_S`` and then abandoned (what it did is
        durable, what it did not the next start's sweep does), so the shutdown's own deadlines
        (a hung engine) are not spent here."""
        if self.task is None:
            return
        self.stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), STOP_S)
        except TimeoutError:
            log.warning("session sweep still running at shutdown: abandoned")
            self.task.cancel()


def start_sweeper(km: AsyncKemem, every_s: float) -> SessionSweeper:
    sweeper = SessionSweeper(km, every_s)
    sweeper.start()
    return sweeper
