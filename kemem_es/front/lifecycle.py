"""Background work and shutdown: flushing reinforcement, draining extractions, closing, and
the clean-up of the weakest memories."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from typing_extensions import Self

from kemem_es.contract.memory import AddResult
from kemem_es.front.dialogue import Dialogue
from kemem_es.memory.cleanup import Policy, UserCleanup
from kemem_es.memory.cleanup import cleanup as run_cleanup
from kemem_es.memory.consolidate import Consolidator, completer_of
from kemem_es.runtime import offload
from kemem_es.store import Scope
from kemem_es.store.templates import install_users
from kemem_es.store.users import Users


class Lifecycle(Dialogue):
    def flush(self) -> int:
        """Write queued reinforcement now (it is written in the background anyway)."""
        self._open()
        # (a worker thread may hold the flush while its engine call waits for AsyncKemem's
        # event loop: never wait for it on the loop itself)
        return offload(self.reinforcer.flush) if "reinforcer" in self.__dict__ else 0

    def close(self, extraction_timeout_s: float | None = None) -> None:
        """Finish background extractions (all of them, or those done within
        ``extraction_timeout_s``), flush what is queued, stop the background writers
        (reinforcement is flushed even when waiting for the extractions fails). The verbs raise
        ``Closed`` afterwards (closing again is harmless)."""
        self._closed = True
        try:
            if "sessions" in self.__dict__:
                self.sessions.manager.worker.close(extraction_timeout_s)
                self.sessions.close()
            if "writes" in self.__dict__:
                self.writes.close(extraction_timeout_s)
        finally:
            if "names" in self.__dict__:
                self.names.close()
            if "reinforcer" in self.__dict__:
                self.reinforcer.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def drain(self, timeout_s: float | None = None) -> list[AddResult]:
        """Wait for background extractions (returns what they stored), then flush
        reinforcement. Past ``timeout_s``: ``ExtractionPending``, and the jobs stay pending."""
        self._open()
        try:
            if "sessions" in self.__dict__:
                offload(self.sessions.manager.worker.drain, timeout_s)
            return offload(self.writes.drain, timeout_s)
        finally:
            self.flush()

    def cleanup(
        self,
        *,
        dry_run: bool = False,
        agent_id: str | None = None,
        user_id: str | None = None,
        now: datetime | None = None,
        **policy: Any,
    ) -> list[UserCleanup]:
        """Forget the weakest memories of users who reached the cap or went inactive (policy
        from settings, overridable: cap, ratio, inactive_days, min_capacity, interval_days);
        then consolidate each other user's accumulated entity descriptions with the LLM
        (docs/facts.md; without an LLM each report's ``consolidation`` says nothing was)."""
        self._open()
        rules = Policy.from_settings(self.settings, **policy)
        install_users(self.engine)
        self.flush()  # activity recorded so far counts
        users, crud = Users(self.engine), self.memories.crud
        merge = Consolidator(self.memories, completer_of(lambda: self.extractor), self.hooks)
        reports = run_cleanup(users, crud, rules, now, dry_run, agent_id, user_id, merge)
        for r in reports:
            if r.deleted:  # what went is no dedup candidate any more
                self.memories.recent.forget(Scope.of(agent_id=r.agent_id, user_id=r.user_id))
        return reports
