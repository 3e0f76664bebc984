"""A session's batches in the background: submitted, claimed, extracted, written, done;
``resume`` starts every open one again after a restart."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from kemem_es.contract.memory import AddResult
from kemem_es.errors import (
    ExtractionError,
    ExtractorNotConfigured,
    KememError,
)
from kemem_es.memory.extract import Extraction
from kemem_es.session.base import _parse
from kemem_es.session.fallback import fallback_extraction
from kemem_es.session.turns import ROLES
from kemem_es.session.viewing import Viewing
from kemem_es.session.window import SessionState
from kemem_es.store.scope import Scope
from kemem_es.store.sessions import (
    batch_key,
    message_key,
    state_key,
)

log = logging.getLogger("kemem_es.session")

TRIES = 3  # a batch's job tries this often in a row (then: the next append or resume)
RETRY_PAUSE_S = 0.5


class BatchJobs(Viewing):
    """A session's batches extracted and written in the background."""

    # -- background jobs ---------------------------------------------------------------------
    def _submit(self, scope: Scope, sid: str, first_seq: int) -> None:
        key = (scope, sid, first_seq)
        with self._guard:
            if key in self._queued:
                return
            self._queued.add(key)

        def job() -> None:
            try:
                for attempt in range(TRIES):  # an engine still warming up, an LLM's 5xx
                    try:
                        self.process(scope, sid, first_seq)
                        return
                    except KememError:
                        if attempt + 1 == TRIES:
                            raise
                        time.sleep(RETRY_PAUSE_S * 4**attempt)
            finally:
                with self._guard:
                    self._queued.discard(key)

        self.worker.submit(f"batch {first_seq} of a session", job)

    def process(self, scope: Scope, sid: str, first_seq: int) -> list[AddResult]:
        """Claim, extract, save the answer, write, mark done (see the module docstring). A
        batch record its session's state does not list (its write lost to another writer's)
        is not extracted: its turns belong to the batches the state does list."""
        batch, state = self.store.get_docs(scope, [batch_key(sid, first_seq), state_key(sid)])
        current = SessionState.of(state.source if state is not None else None)
        listed = state is not None and first_seq in current.open_batches
        if batch is not None and not listed:
            log.warning("batch %d of a session is listed by no state: left alone", first_seq)
            return []
        claimed = batch and self.batches.claim(scope, batch, self.settings.lease_s)
        if not claimed:
            return []
        src = claimed.source
        names = {k: src[k] for k in ("user_name", "agent_name") if src.get(k)}
        if src.get("status") != "extracted" or not isinstance(src.get("result"), dict):
            msgs = self._messages(scope, sid, current, int(src["first_seq"]), int(src["last_seq"]))
            try:
                found = self._extract(msgs, names)
            except ExtractionError as exc:
                self.batches.failed(scope, claimed, str(exc))
                raise
            result = {"events": found.events, "entities": found.entities}
            claimed = self.batches.extracted(scope, claimed, result)
        result = claimed.source["result"]
        extraction = Extraction(
            list(result.get("events") or []), list(result.get("entities") or [])
        )
        try:
            written = (
                self.writer.write_extracted(extraction, scope, sid, names) if extraction else []
            )
        except KememError as exc:  # its lease ends now: the next try claims it at once
            self.batches.failed(scope, claimed, str(exc))
            raise
        self.batches.done(scope, claimed, [r.id for r in written])
        self.held.put_done(scope, sid, current.incarnation, first_seq)
        return written

    def _messages(
        self, scope: Scope, sid: str, state: SessionState, first: int, last: int
    ) -> list[dict[str, Any]]:
        """Messages ``first``..``last`` in order: those this process holds, the rest read."""
        inc = state.incarnation
        held = self.held.turns(scope, sid, inc, range(first, last + 1))
        missing = [n for n in range(first, last + 1) if n not in held]
        keys = [message_key(sid, n) for n in missing]
        read = {
            int(d.source["seq"]): d.source
            for d in self.store.get_docs(scope, keys)
            if d is not None
        }
        self.held.put_turns(scope, sid, inc, read.values())
        return [m for n in range(first, last + 1) if (m := held.get(n) or read.get(n))]

    def _extract(self, msgs: list[dict[str, Any]], names: Mapping[str, str]) -> Extraction:
        turns = [
            {
                "role": m["role"],
                "content": m["content"],
                **({"name": m["name"]} if m.get("name") else {}),
            }
            for m in msgs
            if m.get("role") in ROLES and str(m.get("content", "")).strip()
        ]
        if not turns:
            return Extraction()
        at = _parse(msgs[-1].get("at")) if msgs else None
        now = (at or datetime.now(timezone.utc)).astimezone()
        try:
            extractor = self.extractor()
        except ExtractorNotConfigured:
            return fallback_extraction(turns, user_name=names.get("user_name"), now=now)
        return extractor.extract(
            turns, user_name=names.get("user_name"), agent_name=names.get("agent_name"), now=now
        )

    def resume(self) -> int:
        """Start every open batch of every scope (after a restart); returns how many."""
        found = self.batches.open_batches()
        for scope, batch in found:
            self._submit(scope, batch.source["session_id"], int(batch.source["first_seq"]))
        return len(found)
