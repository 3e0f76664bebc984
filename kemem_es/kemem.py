"""The Python entry point: one object that sets up, indexes, recalls and manages memories.
Each verb is a short delegation: the store writes and reads, the searcher recalls, the memory
service runs the Memory API."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timezone
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from kemem_es.config import Settings, get_settings
from kemem_es.contract.memory import AddResult, HistoryEntry, Memory, MemoryPage
from kemem_es.engine import Engine, connect
from kemem_es.engine.client import engine_errors
from kemem_es.errors import InvalidInput, KememError, invalid_options
from kemem_es.ingest.reader import line_no, read_jsonl
from kemem_es.memory import MemoryService
from kemem_es.memory.cleanup import Policy, UserCleanup
from kemem_es.memory.cleanup import cleanup as run_cleanup
from kemem_es.memory.extract import Extractor
from kemem_es.memory.hooks import HookContext, Hooks, Rejected
from kemem_es.memory.inputs import AddInput
from kemem_es.memory.strength import Reinforcer
from kemem_es.models import Database, MemoryKind, MemoryRecord
from kemem_es.search.params import QueryParams
from kemem_es.search.response import QueryResponse, SimpleResponse
from kemem_es.store import BulkWriter, IndexReport, InitResult, Scope, install
from kemem_es.store.layout import KINDS, index_alias
from kemem_es.store.scope import query_scopes
from kemem_es.store.templates import ensure_compatible, install_users
from kemem_es.store.validation import validate_items

log = logging.getLogger(__name__)

DEMO_FILES: tuple[tuple[str, MemoryKind, Database], ...] = (
    ("official_entities.jsonl", "entities", "official"),
    ("official_events.jsonl", "events", "official"),
    ("user_entities.jsonl", "entities", "user"),
    ("user_events.jsonl", "events", "user"),
)


def demo_path(name: str) -> Path:
    """A bundled demo corpus file (shipped inside the package)."""
    return Path(str(resources.files("kemem_es") / "demo" / name))


class Kemem:
    """Connects lazily: building one is cheap; the engine, model and jieba load on first use.

    >>> km = Kemem(model_dir="../shared/models/m3e-small-onnx")   # or KEMEM_* env vars
    >>> km.init(); km.index_file(Path("events.jsonl"), kind="events", db="user")
    """

    def __init__(self, settings: Settings | None = None, **overrides: Any) -> None:
        self.settings = settings or get_settings(**overrides)
        self._checked: set[tuple[str, str]] = set()
        self.hooks = Hooks()
        self._pending: list[Future[list[AddResult]]] = []
        self.extraction_errors: list[KememError] = []

    @cached_property
    def engine(self) -> Engine:
        return connect(self.settings)

    @cached_property
    def embedder(self) -> Any:
        from kemem_es.embed import load_embedder

        return load_embedder(self.settings)

    @cached_property
    def tokenizer(self) -> Any:
        from kemem_es.text import Tokenizer, default_tokenizer
        from kemem_es.text.tokenizer import USER_DICT_PATH

        if self.settings.user_dict:
            return Tokenizer(user_dict_paths=[USER_DICT_PATH, self.settings.user_dict])
        return default_tokenizer()

    @cached_property
    def expander(self) -> Any:
        from kemem_es.expand import Expander, Lexicon, default_lexicon
        from kemem_es.text import IdfTable, default_idf

        s = self.settings
        if s.lexicon_path or s.lexicon_overrides:
            overrides = [s.lexicon_overrides] if s.lexicon_overrides else []
            lexicon = Lexicon.load(s.lexicon_path, overrides=overrides)
        else:
            lexicon = default_lexicon()
        idf = IdfTable.load(s.idf_path) if s.idf_path else default_idf()
        return Expander(lexicon, self.tokenizer, idf)

    @cached_property
    def searcher(self) -> Any:
        from kemem_es.search.searcher import Searcher

        searcher = Searcher(self.engine, self.embedder, self.tokenizer, self.expander)
        searcher.warm_up()
        return searcher

    def query(self, text: str, *, user_id: str, agent_id: str, **options: Any) -> QueryResponse:
        """Recall events and entities for one utterance (options: see QueryParams)."""
        try:
            params = QueryParams(user_id=user_id, agent_id=agent_id, **options)
        except ValidationError as exc:
            raise invalid_options(exc) from None
        with engine_errors("searching"):
            resp = self.searcher.query(text, params)
        if self.hooks.after_search:
            ctx = HookContext(agent_id, user_id, "user", query=text)
            resp = self.hooks.run_after_search(resp, ctx)
        self._recalled(params, resp)
        return resp

    # -- lifecycle: reinforcement, clean-up -----------------------------------------------
    @cached_property
    def reinforcer(self) -> Reinforcer:
        """Background strength updates (and user activity); created on first use."""
        install_users(self.engine)
        s = self.settings
        return Reinforcer(self.engine, s.reinforce_amount, s.reinforce_flush_s)

    def _recalled(self, params: QueryParams, resp: QueryResponse) -> None:
        """Queue +strength for every memory the query returned (off the critical path)."""
        user, official = query_scopes(params.agent_id, params.user_id)
        scopes = {"user": user, "official": official}
        prefix = self.settings.index_prefix
        if self.settings.reinforce:
            keys = [
                (index_alias(prefix, e.db, "events"), scopes[e.db].doc_id(e.index))  # type: ignore[index]
                for e in resp.memory_events
            ] + [
                (index_alias(prefix, n.db, "entities"), scopes[n.db].doc_id(str(n.index["index"])))  # type: ignore[index]
                for n in resp.memory_entities
            ]
            if keys:
                self.reinforcer.recalled(keys, datetime.now(timezone.utc))
        self.reinforcer.active(user)

    def flush(self) -> int:
        """Write queued reinforcement now (it is written in the background anyway)."""
        return self.reinforcer.flush() if "reinforcer" in self.__dict__ else 0

    def close(self) -> None:
        """Finish background extractions, flush what is queued, stop the background writers."""
        if self._pending:
            self.drain()
        if "_background" in self.__dict__:
            self._background.shutdown(wait=True)
        if "reinforcer" in self.__dict__:
            self.reinforcer.close()

    def __enter__(self) -> Kemem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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
        from settings, overridable: cap, ratio, inactive_days, min_capacity, interval_days)."""
        s = self.settings
        defaults = {
            "cap": s.cleanup_cap,
            "ratio": s.cleanup_ratio,
            "inactive_days": s.cleanup_inactive_days,
            "min_capacity": s.cleanup_min_capacity,
            "interval_days": s.cleanup_interval_days,
        }
        unknown = set(policy) - set(defaults)
        if unknown:
            raise InvalidInput(f"{sorted(unknown)[0]}: unknown option", field=sorted(unknown)[0])
        install_users(self.engine)
        self.flush()  # activity recorded so far counts
        rules = Policy(**{**defaults, **policy})
        return run_cleanup(self.engine, rules, now, dry_run, agent_id, user_id)

    def query_simple(
        self, text: str, *, user_id: str, agent_id: str, **options: Any
    ) -> SimpleResponse:
        """Only the memory texts, in order of importance."""
        resp = self.query(text, user_id=user_id, agent_id=agent_id, **options)
        return SimpleResponse(
            memory_events=[e.description for e in resp.memory_events],
            memory_entities=[e.description for e in resp.memory_entities],
        )

    def prompt(
        self,
        response: QueryResponse,
        now: datetime | None = None,
        user_name: str | None = None,
        agent_name: str | None = None,
        exclude_texts: Sequence[str] = (),
    ) -> str:
        """SPEC §5 prompt text; ``exclude_texts``: what the dialogue already holds."""
        from kemem_es.prompt import render_prompt

        return render_prompt(
            response.memory_events,
            response.memory_entities,
            now or datetime.now(),
            user_name,
            agent_name,
            exclude_texts,
        )

    def init(self, recreate: bool = False) -> list[InitResult]:
        """Install index templates and indices (idempotent; safe to run concurrently)."""
        results = install(self.engine, self.embedder.dim, recreate=recreate)
        self._checked.clear()
        return results

    # -- bulk writes ----------------------------------------------------------------------
    @cached_property
    def writer(self) -> BulkWriter:
        return BulkWriter(self.engine, self.embedder, self.tokenizer, self.settings.embed_batch * 8)

    def _ready(self, kind: MemoryKind, db: Database) -> None:
        """The target index exists and has our template version (checked once per instance)."""
        if (kind, db) not in self._checked:
            ensure_compatible(self.engine, self.embedder.dim, db, kind)
            self._checked.add((kind, db))

    def index_file(
        self,
        path: Path,
        kind: MemoryKind,
        db: Database = "user",
        skip_invalid: bool = False,
        on_progress: Callable[[int, int], None] | None = None,
        dedup: bool = False,
    ) -> IndexReport:
        """Validate a whole JSONL file, then index it. Invalid records raise InvalidInput and
        nothing is written, unless ``skip_invalid`` (then they are listed in the report).
        ``dedup`` folds records into similar existing memories (off: an exact replay)."""
        items, problems = read_jsonl(Path(path))
        return self._import(items, problems, kind, db, skip_invalid, on_progress, dedup, path)

    def index_records(
        self,
        records: Sequence[MemoryRecord | Mapping[str, Any]],
        kind: MemoryKind,
        db: Database = "user",
        skip_invalid: bool = False,
        dedup: bool = False,
    ) -> IndexReport:
        """Like ``index_file`` for records in memory: the same validation (scope rule included),
        problems named ``record N`` (1-based)."""
        items = [(f"record {i}", r) for i, r in enumerate(records, start=1)]
        return self._import(items, [], kind, db, skip_invalid, None, dedup, None)

    def _import(
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
        self._ready(kind, db)
        if self.hooks.before_write:
            items = self._hooked(items, kind, db, problems)
        good, invalid = validate_items(items, kind, db, self.embedder.dim)
        problems = sorted(problems + invalid, key=line_no)
        if problems and not skip_invalid:
            where = f"{path}: " if path else ""
            hint = " (fix them, or pass --skip-invalid to index the valid ones)" if path else ""
            raise InvalidInput(
                f"{where}{len(problems)} invalid record(s); nothing was written{hint}; "
                f"first: {problems[0]}",
                problems,
            )
        merged = dups = 0
        if dedup:
            good, merged, dups = self.memories.dedup_imports(good, kind)
        report = self.writer.write(good, kind, on_progress)
        report.merged, report.duplicates = merged, dups
        report.rejected = problems + report.rejected
        return report

    def _hooked(
        self, items: list[tuple[str, Any]], kind: MemoryKind, db: Database, problems: list[str]
    ) -> list[tuple[str, Any]]:
        """before_write hooks on every record (as dicts); a rejection becomes a problem."""
        out = []
        for label, item in items:
            data = item.model_dump() if isinstance(item, BaseModel) else item
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

    def index_demo(
        self, files: Iterable[tuple[str, MemoryKind, Database]] = DEMO_FILES
    ) -> dict[str, IndexReport]:
        """Index the bundled demo corpus (templates installed first)."""
        self.init()
        return {name: self.index_file(demo_path(name), kind, db) for name, kind, db in files}

    # -- the Memory API -------------------------------------------------------------------
    def _scope(self, agent_id: str | None, user_id: str | None, db: str) -> Scope:
        """The call's scope; an omitted agent is the configured default agent (never an empty
        one: ``""`` is refused like any other invalid id)."""
        agent = self.settings.default_agent_id if agent_id is None else agent_id
        return Scope.of(agent_id=agent, user_id=user_id, db=db)

    @cached_property
    def memories(self) -> MemoryService:
        return MemoryService(self.engine, self.writer, self.settings.dedup_threshold)

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        limit: int = 5,
        filters: Mapping[str, Any] | None = None,
        threshold: float | None = None,
        **options: Any,
    ) -> QueryResponse:
        """Recall for a chat turn: ``query`` with the Memory API's names (``threshold`` is the
        score threshold); other options as in ``query``. Unknown options raise."""
        if threshold is not None:
            options["score_threshold"] = threshold
        return self.query(
            query,
            user_id=user_id,
            agent_id=self._scope(agent_id, user_id, "user").agent_id,
            limit=limit,
            filters=filters,
            **options,
        )

    def add(
        self,
        data: AddInput,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        kind: MemoryKind = "events",
        db: Database = "user",
        infer: bool | Literal["background"] = False,
        refresh: bool = False,
        dedup: bool = True,
        user_name: str | None = None,
        agent_name: str | None = None,
    ) -> list[AddResult]:
        """Remember ``data``: a text, chat messages (``[{"role", "content"}, ...]``, stored as
        one event of the turns joined), or a record (dict / EventRecord / EntityRecord).
        Returns each stored memory with the action taken (ADD / UPDATE / NOOP).
        ``refresh=True`` makes it searchable before returning (else within a second).
        ``dedup``: a new fact close to an existing one (cosine ≥ KEMEM_DEDUP_THRESHOLD)
        updates it, an exact duplicate is a NOOP; each result says which and why.
        ``infer=True``: the extractor turns the messages into entity and event records first
        (all validated before any is written); ``infer="background"`` stores the raw turn now,
        returns it, and extracts afterwards (``km.drain()`` waits; failures are logged and
        kept in ``km.extraction_errors``)."""
        scope = self._scope(agent_id, user_id, db)
        if infer:
            names = {k: v for k, v in (("user_name", user_name), ("agent_name", agent_name)) if v}
            return self._add_inferred(
                data, scope, session_id, metadata, refresh, dedup, infer == "background", names
            )
        self._ready(kind, db)
        results = self._write([(kind, data)], scope, session_id, metadata, refresh, dedup)
        self.reinforcer.active(scope)
        return results

    def _write(
        self,
        items: list[tuple[MemoryKind, Any]],
        scope: Scope,
        session_id: str | None,
        metadata: Mapping[str, Any] | None,
        refresh: bool,
        dedup: bool,
        extracted: bool = False,
    ) -> list[AddResult]:
        """Prepare, hook and validate every item, then write them (nothing written if any
        fails before writing). Text, messages and extracted facts are "said now": the same
        words again are a NOOP whatever their time."""
        prepared = []
        for kind, data in items:
            record = self.memories.prepare(data, scope, kind, session_id, metadata)
            if self.hooks.before_write:
                ctx = HookContext(scope.agent_id, scope.user_id, scope.db, kind)
                (record,) = self.hooks.run_before_write([record], ctx, ["memory"])
            said_now = extracted or not isinstance(data, Mapping | BaseModel)
            prepared.append((kind, record, said_now))
        for kind, record, _ in prepared:  # validate all before writing any
            self.memories.validate(record, kind, scope)
        out: list[AddResult] = []
        for kind, record, said_now in prepared:
            out += self.memories.add_records([record], scope, kind, refresh, "api", dedup, said_now)
        return out

    # -- infer=True -----------------------------------------------------------------------
    @cached_property
    def extractor(self) -> Extractor:
        """The LLM extractor (KEMEM_LLM_*); assign your own object with ``extract`` instead."""
        from kemem_es.memory.extract import extractor_from_settings

        return extractor_from_settings(self.settings)

    def _extract(
        self, data: Any, scope: Scope, names: dict[str, str]
    ) -> list[tuple[MemoryKind, Any]]:
        if isinstance(data, BaseModel) or (isinstance(data, Mapping) and "role" not in data):
            raise InvalidInput("infer: needs text or chat messages, not a record", field="infer")
        if isinstance(data, str):
            messages = [{"role": "user", "content": data}]
        else:
            messages = [data] if isinstance(data, Mapping) else list(data)
        found = self.extractor.extract(
            messages, user_name=names.get("user_name"), agent_name=names.get("agent_name"),
            now=datetime.now().astimezone(),
        )  # fmt: skip
        return [(kind, {**rec, **names}) for kind, rec in found.items()]

    def _add_inferred(
        self,
        data: Any,
        scope: Scope,
        session_id: str | None,
        metadata: Mapping[str, Any] | None,
        refresh: bool,
        dedup: bool,
        background: bool,
        names: dict[str, str],
    ) -> list[AddResult]:
        for kind in KINDS:
            self._ready(kind, scope.db)
        if not background:
            items = self._extract(data, scope, names)
            results = self._write(items, scope, session_id, metadata, refresh, dedup, True)
            self.reinforcer.active(scope)
            return results
        raw = self._write([("events", data)], scope, session_id, metadata, refresh, dedup)

        def later() -> list[AddResult]:
            try:
                items = self._extract(data, scope, names)
                return self._write(items, scope, session_id, metadata, refresh, dedup, True)
            except KememError as exc:
                log.warning("background extraction failed: %s", type(exc).__name__)
                self.extraction_errors.append(exc)
                raise

        self._pending.append(self._background.submit(later))
        self.reinforcer.active(scope)
        return raw

    @cached_property
    def _background(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="kemem-extract")

    def drain(self, timeout_s: float | None = None) -> list[AddResult]:
        """Wait for background extractions; returns what they stored (failures are skipped and
        kept in ``extraction_errors``). Also flushes reinforcement."""
        done: list[AddResult] = []
        pending, self._pending = self._pending, []
        for job in pending:
            try:
                done += job.result(timeout=timeout_s)
            except KememError:
                continue
        self.flush()
        return done

    def get(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        kind: MemoryKind | None = None,
    ) -> Memory:
        """One memory by id, within the scope; NotFound for an unknown id (or another scope's)."""
        return self.memories.get(memory_id, self._scope(agent_id, user_id, db), kind)

    def get_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> MemoryPage:
        """A page of the scope's memories, newest first; ``next_cursor`` fetches the next."""
        scope = self._scope(agent_id, user_id, db)
        return self.memories.get_all(scope, filters, kind, limit, cursor)

    def update(
        self,
        memory_id: str,
        data: str | Mapping[str, Any],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        kind: MemoryKind | None = None,
        refresh: bool = False,
    ) -> AddResult:
        """Change some fields of a memory (a text changes its description); the rest stays."""
        scope = self._scope(agent_id, user_id, db)
        return self.memories.update(memory_id, data, scope, kind, refresh)

    def delete(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        kind: MemoryKind | None = None,
        refresh: bool = False,
    ) -> Memory:
        """Delete one memory (recorded in history); returns what was deleted."""
        scope = self._scope(agent_id, user_id, db)
        return self.memories.delete(memory_id, scope, kind, refresh)

    def delete_all(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
        forget: bool = False,
    ) -> int:
        """Delete every memory of one scope (matching ``filters``), events and entities.
        A scope is required: a user (user db) or, with ``db="official"``, an agent.
        ``forget=True`` also strips that scope's history of its texts. Returns the count."""
        scope = self._scope(agent_id, user_id, db)
        return self.memories.delete_all(scope, filters, kind, forget)

    def count(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
    ) -> int:
        """How many memories of the scope match ``filters`` (what delete_all would delete)."""
        scope = self._scope(agent_id, user_id, db)
        return self.memories.count(scope, filters, kind)

    def history(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
    ) -> list[HistoryEntry]:
        """Every recorded change of a memory, oldest first (also after it was deleted)."""
        scope = self._scope(agent_id, user_id, db)
        return self.memories.history(memory_id, scope)
