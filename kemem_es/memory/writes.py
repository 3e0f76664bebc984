"""The write paths behind ``Kemem``: ``add`` (text, messages, records; with ``infer`` through the
extractor, now or in the background) and imports (files, record lists). Both run the hooks, then
validate everything, and only then write, so a failure before writing leaves nothing behind."""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from kemem_es.contract.memory import AddResult
from kemem_es.errors import (
    EngineUnavailable,
    ExtractionError,
    ExtractionPending,
    InvalidInput,
    KememError,
    NotFound,
    WriteInterrupted,
)
from kemem_es.ingest.reader import line_no
from kemem_es.memory.extract import Extraction, Extractor
from kemem_es.memory.extract.base import Messages
from kemem_es.memory.extract.judge import Judgement, candidates_of
from kemem_es.memory.extract.prompt import render_dialogue
from kemem_es.memory.hooks import HookContext, Hooks, Rejected
from kemem_es.memory.inputs import AddInput, utf8_text
from kemem_es.memory.service import MemoryService
from kemem_es.models import Database, MemoryKind
from kemem_es.runtime import offload
from kemem_es.store.bulk import IndexReport
from kemem_es.store.scope import Scope
from kemem_es.store.validation import by_record, validate_items

log = logging.getLogger(__name__)

KEPT_ERRORS = 100  # extraction_errors keeps the latest: a long-running server must not grow
KEPT_DONE = 1_000  # finished extractions kept for drain(); a server that never drains keeps these


class WritePaths:
    def __init__(
        self,
        memories: MemoryService,
        hooks: Hooks,
        extractor: Callable[[], Extractor],
        on_active: Callable[[Scope], None],
    ) -> None:
        self.memories = memories
        self.hooks = hooks
        self.extractor = extractor
        self.on_active = on_active
        self.extraction_errors: list[Exception] = []
        self.extraction_failures = 0  # all of them since start (a metric), not only those kept
        self._pending: list[Future[list[AddResult]]] = []
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    # -- add ------------------------------------------------------------------------------
    def add(
        self,
        data: AddInput,
        scope: Scope,
        kind: MemoryKind,
        session_id: str | None,
        metadata: Mapping[str, Any] | None,
        refresh: bool,
        dedup: bool,
        infer: bool | Literal["background"],
        names: dict[str, str],
    ) -> list[AddResult]:
        if not infer:
            out = self._write([(kind, data)], scope, session_id, metadata, refresh, dedup, names)
        elif infer != "background":
            items, judged = self._extract(data, names, scope)
            out = self._write(
                items, scope, session_id, metadata, refresh, dedup, names, True, judged
            )
        else:
            # What would make the extraction fail whatever the LLM says (a record, no dialogue,
            # no LLM configured) fails now, before the raw turn is written, not later in a log
            # line.
            render_dialogue(self._messages(data))
            self.extractor()
            raw: list[tuple[MemoryKind, AddInput]] = [("events", data)]
            out = self._write(raw, scope, session_id, metadata, refresh, dedup, names)

            def later() -> list[AddResult]:
                try:
                    items, judged = self._extract(data, names, scope)
                    return self._write(
                        items, scope, session_id, metadata, refresh, dedup, names, True, judged
                    )
                except Exception as exc:
                    self._failed(exc, scope, [r.id for r in out])
                    raise

            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        max_workers=1, thread_name_prefix="kemem-extract"
                    )
                self._pending.append(self._pool.submit(later))
                finished = [j for j in self._pending if j.done()]
                if len(finished) > KEPT_DONE:  # the oldest results go: memory stays bounded
                    gone = set(finished[:-KEPT_DONE])
                    self._pending = [j for j in self._pending if j not in gone]
        self.on_active(scope)
        return out

    def _failed(self, exc: Exception, scope: Scope, raw_ids: list[str]) -> None:
        """A background extraction that failed: logged with its scope, the stored turn's id and
        the reason (a KememError's message carries no user text; for any other exception only
        its type, the traceback at DEBUG), counted, and kept among the latest failures."""
        why = str(exc) if isinstance(exc, KememError) else "not a KememError (traceback at DEBUG)"
        log.warning(
            "background extraction failed (agent_id=%s user_id=%s db=%s, raw turn %s): %s: %s",
            scope.agent_id, scope.user_id, scope.db, ",".join(raw_ids), type(exc).__name__, why,
        )  # fmt: skip
        log.debug("background extraction failure", exc_info=exc)
        with self._lock:
            self.extraction_failures += 1
            self.extraction_errors.append(exc)
            del self.extraction_errors[:-KEPT_ERRORS]

    def _write(
        self,
        items: list[tuple[MemoryKind, AddInput]],
        scope: Scope,
        session_id: str | None,
        metadata: Mapping[str, Any] | None,
        refresh: bool,
        dedup: bool,
        names: Mapping[str, str],
        extracted: bool = False,
        judged: Sequence[Judgement | None] = (),
    ) -> list[AddResult]:
        """Prepare, hook and validate every item, then write them. Text, messages and extracted
        facts are "said now": the same words again are a NOOP whatever their time. The call's
        ``user_name``/``agent_name`` are kept on every memory that does not name its own."""
        prepared = []
        for kind, data in items:
            prep = self.memories.prepare(data, scope, kind, session_id, metadata, names)
            record = {**names, **prep}
            if self.hooks.before_write:
                ctx = HookContext(scope.agent_id, scope.user_id, scope.db, kind)
                (record,) = self.hooks.run_before_write([record], ctx, ["memory"])
            said_now = extracted or not isinstance(data, Mapping | BaseModel)
            prepared.append((kind, record, said_now))
        for kind, record, _ in prepared:  # validate all before writing any
            self.memories.validate(record, kind, scope)
        out: list[AddResult] = []
        # Several facts (an extraction): one refresh at the end, not a wait of about a second
        # for each (20 facts took 20 s); dedup sees the earlier ones through its recent writes.
        each = refresh and len(prepared) == 1
        try:
            for i, (kind, record, said_now) in enumerate(prepared):
                # A record with the caller's own id is stored under that id, never folded into
                # another memory: the caller will look it up by that id.
                fold = dedup and (said_now or not record.get("id"))
                verdict = judged[i] if i < len(judged) else None
                if verdict is not None:  # an LLM judged this fact (memory.extract.judge)
                    out.append(self._judged(verdict, record, scope, kind, each, fold))
                    continue
                out += self.memories.add_records([record], scope, kind, each, "api", fold, said_now)
        except EngineUnavailable as exc:
            if not out:
                raise
            raise WriteInterrupted(  # say which facts are stored: the caller cannot tell
                f"{exc} (after {len(out)} of {len(prepared)} memories were written: "
                f"{', '.join(r.id for r in out)}; the same facts added again fold into them)",
                len(out),
            ) from exc
        if refresh and not each and out:
            self.memories.crud.refresh(scope, {kind for kind, _, _ in prepared})
        return out

    def _judged(
        self, verdict: Judgement, record: dict[str, Any], scope: Scope, kind: MemoryKind,
        refresh: bool, dedup: bool,
    ) -> AddResult:  # fmt: skip
        """Apply the judge's action to one extracted fact. Its target was one of the scope's
        memories shown to it; one deleted since is no target: the fact is added."""
        memories = self.memories
        if verdict.target and verdict.action in ("NOOP", "UPDATE"):
            try:
                if verdict.action == "NOOP":
                    got = memories.get(verdict.target, scope, kind)
                    memories.record_noop(scope, verdict.target, kind, "api")
                    return AddResult(id=got.id, event="NOOP", memory=got, matched_id=got.id)
                changes = {"description": record["description"]}
                if record.get("keyword"):
                    changes["keyword"] = record["keyword"]
                res = memories.update(
                    verdict.target, changes, scope, kind, refresh, "api", reason="judge"
                )
                return res.model_copy(update={"matched_id": verdict.target})
            except NotFound:
                pass
        # ADD or SUPERSEDE: the judge decided, the slot rule does not run again
        (res,) = memories.add_records([record], scope, kind, refresh, "api", dedup, True, False)
        if (
            verdict.action == "SUPERSEDE"
            and verdict.target
            and res.event == "ADD"
            and memories.mark_superseded(scope, kind, verdict.target, res.id, "judge")
        ):
            res = res.model_copy(update={"superseded": [verdict.target]})
        return res

    def write_extracted(
        self, extraction: Extraction, scope: Scope, session_id: str, names: Mapping[str, str]
    ) -> list[AddResult]:
        """A session batch's extracted records through this same path (hooks, validation of
        all before any is written, dedup, slots and supersession, an LLM judge's verdicts
        when the extractor gave them, history); the session's names on every record."""
        items: list[tuple[MemoryKind, AddInput]] = [
            (kind, {**rec, **names}) for kind, rec in extraction.items()
        ]
        judged = _judgements(extraction)
        out = self._write(items, scope, session_id, None, False, True, dict(names), True, judged)
        self.on_active(scope)
        return out

    @staticmethod
    def _messages(data: AddInput) -> Messages:
        """The turns to extract from; InvalidInput for a record (nothing to extract)."""
        if isinstance(data, BaseModel) or (isinstance(data, Mapping) and "role" not in data):
            raise InvalidInput("infer: needs text or chat messages, not a record", field="infer")
        if isinstance(data, str):
            messages: Messages = [{"role": "user", "content": utf8_text(data, "text")}]
        else:
            messages = [data] if isinstance(data, Mapping) else list(data)
            for i, m in enumerate(messages):  # refused here, not by the extractor's HTTP call
                if isinstance(m, Mapping) and isinstance(m.get("content"), str):
                    utf8_text(m["content"], f"messages[{i}].content")
        return messages

    def _extract(
        self, data: AddInput, names: dict[str, str], scope: Scope
    ) -> tuple[list[tuple[MemoryKind, AddInput]], list[Judgement | None]]:
        """The extracted records, and per record the LLM's judgement of it against the
        scope's current memories (when the extractor takes ``candidates``)."""
        messages = self._messages(data)
        for name, value in names.items():
            utf8_text(value, name)
        extractor = self.extractor()
        extra: dict[str, Any] = {}
        if _takes_candidates(extractor):
            extra["candidates"] = candidates_of(self.memories.judge_candidates(scope))
        extract = functools.partial(
            extractor.extract,
            messages, user_name=names.get("user_name"), agent_name=names.get("agent_name"),
            now=datetime.now().astimezone(), **extra,
        )  # fmt: skip
        try:
            found = offload(extract)  # an LLM call of seconds: not on AsyncKemem's event loop
        except KememError:
            raise
        except Exception as exc:  # a custom extractor's bug, an answer nested too deeply...
            # Every failure of the package is a KememError; the traceback stays in the log.
            log.debug("extractor failed", exc_info=exc)
            raise ExtractionError(
                f"the extractor failed ({type(exc).__name__}); nothing was stored"
            ) from exc
        items: list[tuple[MemoryKind, AddInput]] = [
            (kind, {**rec, **names}) for kind, rec in found.items()
        ]
        return items, _judgements(found)

    def drain(self, timeout_s: float | None = None) -> list[AddResult]:
        """Wait for background extractions; what they stored (failures are skipped: they are
        in ``extraction_errors``; of jobs that finished long before, the latest ``KEPT_DONE``).
        ``timeout_s`` bounds the whole wait; past it :class:`ExtractionPending` is raised and
        every job stays pending (finished ones too), so the next ``drain()`` still waits for
        them and returns what they stored."""
        with self._lock:
            pending = list(self._pending)
        _, running = wait(pending, timeout=timeout_s)
        if running:
            raise ExtractionPending(
                f"{len(running)} background extraction(s) still running after {timeout_s} s; "
                "they stay pending: drain() again to wait for them",
                len(running),
            )
        with self._lock:
            self._pending = [j for j in self._pending if j not in pending]
        done: list[AddResult] = []
        for job in pending:
            if job.exception() is None:  # a failure is in extraction_errors already
                done += job.result()
        return done

    def close(self, timeout_s: float | None = None) -> None:
        """Wait for the background extractions (``timeout_s``: at most that long; a stopping
        server must exit before it is killed). Those not finished then are given up and
        logged by count: their raw turns are stored already, only their extracted memories
        are missing."""
        try:
            self.drain(timeout_s)
        except ExtractionPending as exc:
            log.warning(
                "%d background extraction(s) not finished at close after %s s, given up "
                "(their raw turns are stored; their extracted memories are not)",
                exc.pending,
                timeout_s,
            )
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=timeout_s is None, cancel_futures=timeout_s is not None)
            with self._lock:  # a cancelled job never runs, and wait() would wait for it forever
                self._pending = [j for j in self._pending if not j.cancelled()]

    # -- imports --------------------------------------------------------------------------
    def import_items(
        self,
        items: list[tuple[str, Any]],
        problems: list[str],
        kind: MemoryKind,
        db: Database,
        skip_invalid: bool,
        on_progress: Callable[[int, int], None] | None,
        dedup: bool,
        path: Path | None,
    ) -> IndexReport:
        """Hooks, then validation of everything, then (dedup and) the bulk write."""
        if self.hooks.before_write:
            items = self._hooked(items, kind, db, problems)
        good, invalid = validate_items(items, kind, db, self.memories.dim)
        problems = sorted(problems + invalid, key=line_no)
        if problems and not skip_invalid:
            where = f"{path}: " if path else ""
            hint = " (fix them, or pass --skip-invalid to index the valid ones)" if path else ""
            raise InvalidInput(
                f"{where}{len(by_record(problems))} invalid record(s); nothing was written{hint}; "
                f"first: {problems[0]}",
                problems,
            )
        merged = dups = 0
        if dedup:
            good, merged, dups = self.memories.dedup_imports(good, kind)
        report = self.memories.writer.write(good, kind, on_progress)
        report.merged, report.duplicates = merged, dups
        if kind == "entities":  # facts that change: docs/facts.md
            report.superseded = self.memories.supersede_imported(good, kind, "import")
        report.rejected = problems + report.rejected
        return report

    def _hooked(
        self, items: list[tuple[str, Any]], kind: MemoryKind, db: Database, problems: list[str]
    ) -> list[tuple[str, Any]]:
        """before_write hooks on every record (as dicts); a rejection becomes a problem."""
        out = []
        for label, item in items:
            data = item.model_dump(exclude_unset=True) if isinstance(item, BaseModel) else item
            if not isinstance(data, dict):
                out.append((label, item))
                continue
            ctx = HookContext(str(data.get("agent_id")), data.get("user_id"), db, kind)
            try:
                (data,) = self.hooks.run_before_write([data], ctx, [label])
            except Rejected as exc:
                problems.append(str(exc))
                continue
            out.append((label, data))
        return out


def _takes_candidates(extractor: Any) -> bool:
    """Whether an extractor's ``extract`` accepts the judge's ``candidates`` (a custom one
    written before it need not)."""
    try:
        return "candidates" in inspect.signature(extractor.extract).parameters
    except (TypeError, ValueError):
        return False


def _judgements(found: Extraction) -> list[Judgement | None]:
    """Per record of ``found.items()`` (events, then entities): the LLM's judgement of it,
    None for events and for entities of an extractor that judged nothing."""
    judged: list[Judgement | None] = [None] * len(found.events)
    judged += list(getattr(found, "judgements", []) or [None] * len(found.entities))
    return judged
