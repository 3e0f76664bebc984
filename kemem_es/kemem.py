"""The Python entry point: one object that sets up, indexes, recalls and manages memories.
Each verb is a short delegation: the store writes and reads, the searcher recalls, the memory
service runs the Memory API."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError
from typing_extensions import Unpack

from kemem_es.config import Settings, get_settings
from kemem_es.config import setting_file as _setting_file
from kemem_es.contract.context import Appended, ContextResult, DialogueTurn, SessionInfo
from kemem_es.contract.memory import AddResult, HistoryEntry, Memory, MemoryPage
from kemem_es.contract.options import QueryOptions, SearchOptions
from kemem_es.contract.params import MAX_QUERY_CHARS, QueryParams
from kemem_es.contract.response import AdditionalInfo, QueryResponse, SimpleResponse
from kemem_es.engine import Engine, connect
from kemem_es.engine.errors import deadline
from kemem_es.errors import (
    Closed,
    EngineUnavailable,
    ExtractorNotConfigured,
    InvalidInput,
    activity,
    guarded,
    invalid_options,
)
from kemem_es.ingest.reader import read_jsonl
from kemem_es.logs import quiet_client_logs
from kemem_es.memory import MemoryService
from kemem_es.memory.cleanup import Policy, UserCleanup
from kemem_es.memory.cleanup import cleanup as run_cleanup
from kemem_es.memory.extract import Extractor
from kemem_es.memory.hooks import HookContext, Hooks
from kemem_es.memory.inputs import AddInput, utf8_text
from kemem_es.memory.strength import Reinforcer
from kemem_es.memory.writes import WritePaths
from kemem_es.models import Database, MemoryKind, MemoryRecord, Time
from kemem_es.runtime import Bridge, lazy, offload
from kemem_es.search.stopwatch import Stopwatch
from kemem_es.store import BulkWriter, IndexReport, InitResult, Scope, install
from kemem_es.store.crud import Crud
from kemem_es.store.embedding import record as record_calibration
from kemem_es.store.history import LIMIT as HISTORY_LIMIT
from kemem_es.store.layout import KINDS, all_aliases, checked_kind, index_alias
from kemem_es.store.names import ScopeNames
from kemem_es.store.nearest import Neighbours
from kemem_es.store.reinforce import Reinforcements, recall_keys
from kemem_es.store.scope import query_scopes
from kemem_es.store.templates import ensure_compatible, install_users
from kemem_es.store.users import Users

if TYPE_CHECKING:  # loaded on first use (jieba, the model, the lexicon take seconds)
    from kemem_es.expand import Expander
    from kemem_es.search.searcher import Searcher
    from kemem_es.session import Sessions, Summarizer, TokenCounter
    from kemem_es.store.bulk import TextEmbedder
    from kemem_es.store.consistency import HistoryRepair
    from kemem_es.store.stats import MemoryStats
    from kemem_es.text import Tokenizer

log = logging.getLogger(__name__)

DEMO_FILES: tuple[tuple[str, MemoryKind, Database], ...] = (
    ("official_entities.jsonl", "entities", "official"),
    ("official_events.jsonl", "events", "official"),
    ("user_entities.jsonl", "entities", "user"),
    ("user_events.jsonl", "events", "user"),
)


_NOW: TypeAdapter[datetime | None] = TypeAdapter(Time | None)


def _exclude_texts(value: object) -> list[str]:
    """``Kemem.prompt``'s ``exclude_texts`` as a list of texts: one ``str`` is one text (not
    its characters), None is none; otherwise an iterable of texts (None items are skipped).
    Anything else is ``InvalidInput`` naming the argument (a message dict: give its content)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise InvalidInput(
            f"exclude_texts: give a text or a list of texts, not {type(value).__name__}",
            field="exclude_texts",
        )
    texts = []
    for i, item in enumerate(value):
        if item is None:
            continue
        if not isinstance(item, str):
            raise InvalidInput(
                f"exclude_texts[{i}]: give a text, not {type(item).__name__}"
                + (" (a message: give its content)" if isinstance(item, Mapping) else ""),
                field="exclude_texts",
            )
        texts.append(item)
    return texts


def with_session(
    filters: Mapping[str, Any] | None, session_id: str | None
) -> Mapping[str, Any] | None:
    """``session_id=`` of get_all / search / count / delete_all (docs/SPEC.md §7): the filter
    ``{"session_id": …}`` together with the caller's own filters."""
    if session_id is None:
        return filters
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInput("session_id: a non-empty string", field="session_id")
    return (
        {"and": [dict(filters), {"session_id": session_id}]}
        if filters
        else {"session_id": session_id}
    )


def _degraded(text: str, params: QueryParams, reason: str, clock: Stopwatch) -> QueryResponse:
    """The empty-but-valid answer of a degraded query, with the time it took (``total``: the
    longest answers, a deadline's, are the ones worth timing)."""
    info = AdditionalInfo(
        timings_ms=clock.total(), query=text, tokens=[], base_words=[], expanded_words=[],
        mode=params.mode, degraded=True, degraded_reason=reason,
    )  # fmt: skip
    return QueryResponse(additional_info=info)


def demo_path(name: str) -> Path:
    """A bundled demo corpus file (shipped inside the package)."""
    return Path(str(resources.files("kemem_es") / "demo" / name))


class Kemem:
    """Connects lazily: building one is cheap; the engine, model and jieba load on first use.

    >>> km = Kemem(model_dir="/path/to/onnx-model")   # or KEMEM_* env vars
    >>> km.init(); km.index_file(Path("events.jsonl"), kind="events", db="user")
    """

    def __init__(
        self, settings: Settings | None = None, *, bridge: Bridge | None = None, **overrides: Any
    ) -> None:
        """``bridge``: run on the official async clients over that bridge (what AsyncKemem
        does; see runtime.py) — every verb below is then the async API's core too."""
        self.settings = settings or get_settings(**overrides)
        self._bridge = bridge
        self._checked: set[tuple[str, str]] = set()
        self._closed = False
        self.hooks = Hooks()
        # The running session summary's LLM; None: the extractor's endpoint when it has one.
        self.summarizer: Summarizer | None = None

    def _open(self) -> None:
        """Every verb starts here: after ``close()`` the background writers are stopped, so a
        verb would queue reinforcement and activity that nothing writes any more."""
        if self._closed:
            raise Closed(
                "this Kemem was closed (close(), aclose() or the end of its with block): its "
                "background writers are stopped, so a recall's reinforcement or a user's "
                "activity would be lost; build a new instance"
            )

    @lazy
    def engine(self) -> Engine:
        quiet_client_logs()  # the clients' tracebacks and httpx's URLs (kemem_es.logs)
        return connect(self.settings, self._bridge)

    @lazy
    def embedder(self) -> TextEmbedder:
        from kemem_es.embed import load_embedder

        return load_embedder(self.settings)

    @lazy
    def tokenizer(self) -> Tokenizer:
        from kemem_es.text import Tokenizer, default_tokenizer
        from kemem_es.text.tokenizer import USER_DICT_PATH

        if self.settings.user_dict:
            from kemem_es.text.tokenizer import _read_user_dict

            with _setting_file("user_dict"):  # checked now, named, not at the first cut
                _read_user_dict(self.settings.user_dict)
            return Tokenizer(user_dict_paths=[USER_DICT_PATH, self.settings.user_dict])
        return default_tokenizer()

    @lazy
    def expander(self) -> Expander:
        from kemem_es.expand import Expander, Lexicon, default_lexicon
        from kemem_es.text import IdfTable, default_idf

        s = self.settings
        if s.lexicon_path or s.lexicon_overrides:
            overrides = [s.lexicon_overrides] if s.lexicon_overrides else []
            with _setting_file("lexicon_path", also=("lexicon_overrides", s.lexicon_overrides)):
                lexicon = Lexicon.load(s.lexicon_path, overrides=overrides)
        else:
            lexicon = default_lexicon()
        with _setting_file("idf_path"):
            idf = IdfTable.load(s.idf_path) if s.idf_path else default_idf()
        return Expander(lexicon, self.tokenizer, idf)

    @lazy
    def names(self) -> ScopeNames:
        """Each scope's names, shared by the writer and the searcher: a name written is kept
        whole in the next query at once."""
        return ScopeNames(self.engine)

    @lazy
    def searcher(self) -> Searcher:
        from kemem_es.search.rewrite import rewriter_for
        from kemem_es.search.searcher import Searcher

        searcher = Searcher(self.engine, self.embedder, self.tokenizer, self.expander, self.names)
        searcher.rewriter = rewriter_for(self.settings)
        offload(searcher.warm_up)  # seconds of loading: off the event loop in AsyncKemem
        return searcher

    def readiness(self) -> dict[str, Any]:
        """The engine's dialect and version, and which of the prefix's indices are missing."""
        self._open()
        with activity("checking readiness"):
            engine = self.engine
            aliases = all_aliases(self.settings.index_prefix)
            missing = [a for a in aliases if not engine.index_exists(a)]
        return {"engine": engine.dialect.name, "version": engine.version, "missing": missing}

    def warm_up(self) -> None:
        """Connect, load jieba, the lexicon and the model, learn the indexed names: what the
        first query would otherwise pay for (a server calls this before it takes traffic)."""
        self._open()
        _ = self.tokenizer, self.expander  # a bad KEMEM_* text file is a settings error, first
        with activity("warming up"):
            _ = self.searcher

    def prepare_context(self, context: Any, *, context_turns: int | None = None) -> bool:
        """Embed a dialogue's earlier turns now, off the request path (after the agent's reply
        is sent, before the user's next turn), for the query that brings them as its
        ``context`` with ``context_vector="earlier"``: that query then embeds its utterance
        only. ``context`` as ``query`` takes it. Returns whether anything was computed."""
        self._open()
        extra = {} if context_turns is None else {"context_turns": context_turns}
        try:
            params = QueryParams(user_id="-", agent_id="-", context=context, **extra)
        except ValidationError as exc:
            raise invalid_options(exc) from None
        return self.searcher.prepare_context(params)

    def query(
        self,
        text: str,
        *,
        user_id: str,
        agent_id: str,
        degrade: bool | None = None,
        reinforce: bool | None = None,
        **options: Unpack[QueryOptions],
    ) -> QueryResponse:
        """Recall events and entities for one utterance (options: see QueryParams).

        The engine part has one deadline, ``query_timeout_s`` for the whole call; a failure is
        a ``KememError`` (``EngineUnavailable``, ``DeadlineExceeded``...). ``degrade`` (default
        ``KEMEM_DEGRADE``): answer "no memories" instead, with ``additional_info.degraded`` and
        the reason — for a chat turn that should go on without memory rather than fail.
        ``reinforce=False``: a look that is not a recall (no strength gained, no activity)."""
        self._open()
        if not isinstance(text, str):
            kind_of = type(text).__name__
            raise InvalidInput(f"text: the utterance as a string, not {kind_of}", field="text")
        if len(text) > MAX_QUERY_CHARS:  # one turn; the CPU stages grow with it
            raise InvalidInput(
                f"text: {len(text):,} characters; at most {MAX_QUERY_CHARS:,} (one chat turn: "
                "earlier turns go in context)",
                field="text",
            )
        utf8_text(text, "text")
        try:
            params = QueryParams(user_id=user_id, agent_id=agent_id, **options)
        except ValidationError as exc:
            raise invalid_options(exc) from None
        clock = Stopwatch()
        try:
            self.warm_up()  # loading is not the query's time: the deadline starts after it
            clock = Stopwatch()
            with deadline(self.settings.query_timeout_s), activity("searching"):
                self._own_writes_visible(params.agent_id, params.user_id)
                resp = self.searcher.query(text, params)
        except EngineUnavailable as exc:
            if not (self.settings.degrade if degrade is None else degrade):
                raise
            log.warning("query degraded: %s", type(exc).__name__)  # the text may quote input
            return _degraded(text, params, str(exc), clock)
        if self.hooks.after_search:
            ctx = HookContext(agent_id, user_id, "user", query=text)
            resp = self.hooks.run_after_search(resp, ctx)
        if reinforce is not False:
            self._recalled(params, resp, self.settings.reinforce if reinforce is None else True)
        return resp

    def _own_writes_visible(self, agent_id: str, user_id: str) -> None:
        """Read-your-own-writes for a query (``store.fresh``: best effort, within its deadline)."""
        from kemem_es.store import fresh

        reads = [
            (index_alias(self.settings.index_prefix, scope.db, k), scope.routing)
            for scope in query_scopes(agent_id, user_id)
            for k in KINDS
        ]
        fresh.before_read(self.engine, reads, self.engine.read_timeout)

    # -- lifecycle: reinforcement, clean-up -----------------------------------------------
    @lazy
    def reinforcer(self) -> Reinforcer:
        """Background strength updates (and user activity); created on first use."""
        install_users(self.engine)
        s = self.settings
        return Reinforcer(Reinforcements(self.engine), s.reinforce_amount, s.reinforce_flush_s)

    def _recalled(self, params: QueryParams, resp: QueryResponse, strengthen: bool) -> None:
        """The user was active; with ``strengthen``, queue +strength for every memory the
        query returned (written in the background, off the critical path)."""
        user, official = query_scopes(params.agent_id, params.user_id)
        keys = recall_keys(self.settings.index_prefix, user, official, resp) if strengthen else []
        if keys:
            self.reinforcer.recalled(keys, datetime.now(timezone.utc))
        self.reinforcer.active(user)

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
        self._open()
        rules = Policy.from_settings(self.settings, **policy)
        install_users(self.engine)
        self.flush()  # activity recorded so far counts
        users, crud = Users(self.engine), self.memories.crud
        reports = run_cleanup(users, crud, rules, now, dry_run, agent_id, user_id)
        for r in reports:
            if r.deleted:  # what went is no dedup candidate any more
                self.memories.recent.forget(Scope.of(agent_id=r.agent_id, user_id=r.user_id))
        return reports

    def query_simple(
        self, text: str, *, user_id: str, agent_id: str, **options: Unpack[QueryOptions]
    ) -> SimpleResponse:
        """Only the memory texts, in order of importance."""
        return self.query(text, user_id=user_id, agent_id=agent_id, **options).simple()

    def prompt(
        self,
        response: QueryResponse,
        now: datetime | str | None = None,
        user_name: str | None = None,
        agent_name: str | None = None,
        exclude_texts: str | Iterable[str] | None = (),
    ) -> str:
        """docs/SPEC.md §5 prompt text for the ``QueryResponse`` that ``query`` / ``search``
        returned. ``exclude_texts``: what the dialogue already holds, as texts (one ``str`` is
        one text: the whole dialogue may be given as it is); a memory one of them contains is
        left out. ``now`` follows the records' time rule, as ``query``'s does (a date string
        works); an event written with an offset is shown on now's wall clock, so give ``now``
        in the user's zone (default: this machine's clock, in its zone). A wrong type for any
        argument is ``InvalidInput`` naming it."""
        from kemem_es.prompt import render_prompt

        if not isinstance(response, QueryResponse):
            hint = " (not its to_contract() dict)" if isinstance(response, Mapping) else ""
            raise InvalidInput(
                f"response: give the QueryResponse that query or search returned{hint}, "
                f"not {type(response).__name__}",
                field="response",
            )
        try:
            when = _NOW.validate_python(now)
        except ValidationError as exc:
            why = exc.errors()[0]["msg"] if exc.errors() else str(exc)
            raise InvalidInput(f"now: {why}", field="now") from None
        for field, name in (("user_name", user_name), ("agent_name", agent_name)):
            if name is not None and not isinstance(name, str):
                raise InvalidInput(
                    f"{field}: give a text or None, not {type(name).__name__}", field=field
                )
        return render_prompt(
            response.memory_events,
            response.memory_entities,
            when or datetime.now().astimezone(),
            user_name,
            agent_name,
            _exclude_texts(exclude_texts),
        )

    def init(self, recreate: bool = False) -> list[InitResult]:
        """Install index templates and indices (idempotent; safe to run concurrently)."""
        self._open()
        cal = self.calibration
        results = install(self.engine, self.embedder.dim, recreate=recreate, embedding=cal)
        if cal is not None:
            record_calibration(self.engine, cal)  # indices made before calibration existed
        self._checked.clear()
        return results

    @lazy
    def calibration(self) -> dict[str, Any] | None:
        """The configured model's vector scale (embed.calibrate), measured once per process;
        None for a caller's own embedder object (the reference constants apply)."""
        from kemem_es.embed.calibrate import for_embedder

        return for_embedder(self.embedder)

    def calibrate(self) -> dict[str, Any] | None:
        """Measure the model's calibration and store it with the prefix's indices (those that
        have none); refused when they hold another model's vectors."""
        self._open()
        cal = self.calibration
        if cal is not None:
            with activity("storing the calibration"):
                record_calibration(self.engine, cal)
        return cal

    # -- bulk writes ----------------------------------------------------------------------
    @lazy
    def writer(self) -> BulkWriter:
        batch = self.settings.embed_batch * 8
        return BulkWriter(self.engine, self.embedder, self.tokenizer, batch, names=self.names)

    def _ready(self, kind: MemoryKind, db: Database) -> None:
        """The target index exists and has our template version (checked once per instance)."""
        kind = checked_kind(kind)  # every write passes here; a kind names an index
        if (kind, db) not in self._checked:
            ensure_compatible(
                self.engine,
                self.embedder.dim,
                db,
                kind,
                embedding=lambda: self.calibration,
                model=self.embedder.name,
            )
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
        self._open()
        items, problems = read_jsonl(Path(path))
        self._ready(kind, db)
        return self.writes.import_items(
            items, problems, kind, db, skip_invalid, on_progress, dedup, path
        )

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
        self._open()
        items = [(f"record {i}", r) for i, r in enumerate(records, start=1)]
        self._ready(kind, db)
        return self.writes.import_items(items, [], kind, db, skip_invalid, None, dedup, None)

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

    @lazy
    def extractor(self) -> Extractor:
        """The LLM extractor (KEMEM_LLM_*); assign your own object with ``extract`` instead."""
        from kemem_es.memory.extract import extractor_from_settings

        return extractor_from_settings(self.settings)

    @lazy
    def writes(self) -> WritePaths:
        return WritePaths(self.memories, self.hooks, lambda: self.extractor, self.reinforcer.active)

    @property
    def extraction_errors(self) -> list[Exception]:
        """The latest background extractions that failed (``infer="background"``; at most
        100, oldest dropped first)."""
        return self.writes.extraction_errors

    @property
    def extraction_failures(self) -> int:
        """How many background extractions failed since this instance started (all of them,
        unlike ``extraction_errors``): the server's ``/metrics`` counter."""
        return self.writes.extraction_failures if "writes" in self.__dict__ else 0

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

    @lazy
    def memories(self) -> MemoryService:
        settings = self.settings
        return MemoryService(
            Crud(self.engine),
            Neighbours(self.engine),
            lambda: self.writer,
            settings.dedup_threshold,
            settings.dedup_min_overlap,
            settings.dedup_recent_s,
        )

    def search(
        self,
        query: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        limit: int = 5,
        filters: Mapping[str, Any] | None = None,
        threshold: float | None = None,
        session_id: str | None = None,
        degrade: bool | None = None,
        reinforce: bool | None = None,
        **options: Unpack[SearchOptions],
    ) -> QueryResponse:
        """Recall for a chat turn: ``query`` with the Memory API's names (``threshold`` is the
        score threshold; ``reinforce=False``: a look, not a recall); other options as in ``query``.
        Unknown options raise, and so does
        ``top_k``: elsewhere the number of results, in ``query`` the number of base words, so
        here the number of results is ``limit``."""
        if "top_k" in options:
            raise InvalidInput(
                "top_k: the number of results is `limit` here (top_k=… is the number of base "
                "words of the keyword expansion, a query() option)",
                field="top_k",
            )
        if threshold is not None:
            if "score_threshold" in options:
                raise InvalidInput(
                    "threshold: give threshold or score_threshold, not both", field="threshold"
                )
            options["score_threshold"] = threshold
        return self.query(
            query,
            user_id=user_id,
            agent_id=self._scope(agent_id, user_id, "user").agent_id,
            limit=limit,
            filters=with_session(filters, session_id),
            degrade=degrade,
            reinforce=reinforce,
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
        scene_change: bool = False,
        dialogue: bool = True,
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
        kept in ``km.extraction_errors``).

        With a ``session_id``, text and chat messages are the session's dialogue
        (docs/sessions.md): they are appended to it, and every ``KEMEM_SESSION_BATCH_TURNS``
        turns (once the window holds ``KEMEM_SESSION_TRIGGER_TURNS``; ``scene_change=True``:
        all of them) are extracted in the background; the result lists what this call stored
        as memories (with ``infer=True`` the batches it handed over are extracted before it
        returns). A record with a ``session_id`` is stored as a memory, as before; so is text
        with ``dialogue=False`` (one memory tagged with the session)."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        names = {k: v for k, v in (("user_name", user_name), ("agent_name", agent_name)) if v}
        if session_id is not None and dialogue and not _is_record(data):
            return self._append(data, scope, session_id, names, scene_change, infer is True)[1]
        for k in KINDS if infer else (kind,):
            self._ready(k, db)
        return self.writes.add(
            data, scope, kind, session_id, metadata, refresh, dedup, infer, names
        )

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
        self._open()
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
        session_id: str | None = None,
    ) -> MemoryPage:
        """A page of the scope's memories, newest first (updatetime); ``next_cursor`` fetches
        the next. The pages of one listing show the scope as it was at the first page (an
        engine point in time), so a memory changed meanwhile is neither missed nor repeated."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        return self.memories.get_all(scope, with_session(filters, session_id), kind, limit, cursor)

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
        """Change some fields of a memory (a text changes its description); the rest stays.
        The before_write hooks see the new version, as they see an add's record."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        return self.memories.update(memory_id, data, scope, kind, refresh, hooks=self.hooks)

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
        self._open()
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
        session_id: str | None = None,
    ) -> int:
        """Delete every memory of one scope (matching ``filters``), events and entities.
        A scope is required: a user (user db) or, with ``db="official"``, an agent.
        ``forget=True`` also strips that scope's history of its texts. Returns the count."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        n = self.memories.delete_all(scope, with_session(filters, session_id), kind, forget)
        if db == "user" and filters is None and kind is None:  # the scope's sessions go too
            if session_id is None:
                self.sessions.delete_scope(scope, forget)
            else:
                self.sessions.delete(scope, session_id, forget)
        return n

    def count(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        filters: Mapping[str, Any] | None = None,
        kind: MemoryKind | None = None,
        session_id: str | None = None,
    ) -> int:
        """How many memories of the scope match ``filters`` (what delete_all would delete)."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        return self.memories.count(scope, with_session(filters, session_id), kind)

    def history(
        self,
        memory_id: str,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        db: Database = "user",
        limit: int = HISTORY_LIMIT,
    ) -> list[HistoryEntry]:
        """The recorded changes of a memory, oldest first (also after it was deleted): the
        newest ``limit`` (1–10,000) of them when there are more."""
        self._open()
        scope = self._scope(agent_id, user_id, db)
        return self.memories.history(memory_id, scope, limit)

    def repair_history(
        self,
        *,
        agent_id: str | None = None,
        user_id: str | None = None,
        db: Database = "user",
        dry_run: bool = False,
    ) -> HistoryRepair:
        """Find (and, unless ``dry_run``, record) what the history lacks in one agent's memories
        (one user's, with ``user_id``): stored versions that are not their memory's newest
        entry, deletions with no DELETE entry (see docs/consistency.md). ``kemem-es doctor``."""
        self._open()
        from kemem_es.store.consistency import repair_history

        scope = self._scope(agent_id, user_id or ("-" if db == "user" else None), db)
        user = scope.user_id if user_id is not None else None
        return repair_history(self.engine, scope.db, scope.agent_id, user, dry_run)

    def stats(self, *, agents: Collection[str] | None = None) -> MemoryStats:
        """Engine health and version, counts per agent / user / database / kind, the strength
        distribution and recent clean-ups (the dashboard's overview); ``agents`` limits the
        numbers to those agents."""
        self._open()
        from kemem_es.store.stats import memory_stats

        with activity("reading statistics"):
            return memory_stats(self.engine, agents)

    # -- conversation sessions (docs/sessions.md) ------------------------------------------
    @lazy
    def token_counter(self) -> TokenCounter:
        """What counts ``context()`` tokens (KEMEM_SESSION_TOKENIZER, else the model's)."""
        from kemem_es.session import token_counter

        return token_counter(self.settings.session_tokenizer, self.settings.model_dir)

    def _summarizer(self) -> Summarizer | None:
        from kemem_es.session.summary import summarizer_for

        if self.summarizer is not None:
            return self.summarizer
        try:
            return summarizer_for(self.extractor)
        except ExtractorNotConfigured:
            return None

    @lazy
    def sessions(self) -> Sessions:
        from kemem_es.session import SessionManager, Sessions
        from kemem_es.store.sessions import SessionStore

        s = self.settings
        manager = SessionManager(
            SessionStore(self.engine), s.session, lambda: self.extractor, self._summarizer,
            self.writes, lambda: self.token_counter,
        )  # fmt: skip
        return Sessions(
            manager, self._recall, lambda: self.token_counter, s.session, s.index_prefix,
            self.prepare_context,
        )  # fmt: skip

    def _recall(
        self, text: str, *, user_id: str, agent_id: str, degrade: bool | None = None,
        **options: Any,
    ) -> QueryResponse:  # fmt: skip
        """``query`` as the context's recall (its options are checked by QueryParams)."""
        return self.query(text, user_id=user_id, agent_id=agent_id, degrade=degrade, **options)

    def _append(
        self, data: AddInput, scope: Scope, session_id: str, names: Mapping[str, str],
        scene_change: bool = False, wait: bool = False,
    ) -> tuple[Appended, list[AddResult]]:  # fmt: skip
        """``add`` with a session: what was appended, and the memories stored now."""
        for k in KINDS:
            self._ready(k, scope.db)
        out = self.sessions.add(scope, session_id, data, names, scene_change, wait)
        self.writes.on_active(scope)
        return out

    def context(
        self,
        message: str,
        *,
        user_id: str,
        agent_id: str | None = None,
        session_id: str | None = None,
        max_tokens: int | None = None,
        limit: int | None = None,
        score_threshold: float | None = None,
        now: datetime | str | None = None,
        user_name: str | None = None,
        agent_name: str | None = None,
        **options: Any,
    ) -> ContextResult:
        """The memory context of one chat turn in three parts — the session's dialogue (recent
        turns verbatim, the running summary), the overview timeline (前情提要) and the recalled
        details (entities by tier, then events) — with nothing in two parts, rendered as the
        prompt text and fitted to ``max_tokens`` (default KEMEM_SESSION_MAX_TOKENS) by the
        configured tokenizer. Other options go to the recall (see QueryParams)."""
        self._open()
        scope = self._scope(agent_id, user_id, "user")
        try:
            when = _NOW.validate_python(now) or datetime.now().astimezone()
        except ValidationError as exc:
            raise InvalidInput(f"now: {exc.errors()[0]['msg']}", field="now") from None
        given = (("limit", limit), ("score_threshold", score_threshold))
        opts = {k: v for k, v in given if v is not None} | options
        return self.sessions.context(
            scope, message, session_id=session_id, max_tokens=max_tokens, user_name=user_name,
            agent_name=agent_name, now=when, options=opts,
        )  # fmt: skip

    def end_session(
        self, session_id: str, *, user_id: str, agent_id: str | None = None
    ) -> Appended:
        """The session ended (or the scene changed): its whole window goes to extraction."""
        self._open()
        return self.sessions.end(self._scope(agent_id, user_id, "user"), session_id)

    def session_messages(
        self, session_id: str, *, user_id: str, agent_id: str | None = None, limit: int = 1000
    ) -> list[DialogueTurn]:
        """A session's messages, in order."""
        self._open()
        return self.sessions.messages(self._scope(agent_id, user_id, "user"), session_id, limit)

    def session_message(
        self, session_id: str, seq: int, *, user_id: str, agent_id: str | None = None
    ) -> DialogueTurn:
        """One message of a session by its sequence number (NotFound otherwise)."""
        self._open()
        return self.sessions.message(self._scope(agent_id, user_id, "user"), session_id, seq)

    def list_sessions(
        self, *, user_id: str, agent_id: str | None = None, limit: int = 100
    ) -> list[SessionInfo]:
        """A user's sessions, most recently active first."""
        self._open()
        return self.sessions.sessions(self._scope(agent_id, user_id, "user"), limit)

    def delete_session(
        self, session_id: str, *, user_id: str, agent_id: str | None = None, forget: bool = False
    ) -> int:
        """Delete a session's messages (recorded in history; ``forget``: without text).
        Its extracted memories stay (``delete_all(session_id=…)`` removes those too)."""
        self._open()
        return self.sessions.delete(self._scope(agent_id, user_id, "user"), session_id, forget)

    def resume_sessions(self) -> int:
        """Start the batches a previous process left unextracted (their lease passed) and end
        every session idle longer than KEMEM_SESSION_IDLE_S (its window goes to extraction);
        returns how many batches were started. A server runs this every
        KEMEM_SESSION_SWEEP_S (docs/sessions.md)."""
        self._open()
        return self.sessions.manager.sweep().started


def _is_record(data: object) -> bool:
    """A record (stored as a memory) rather than dialogue (text or chat messages)."""
    return isinstance(data, BaseModel) or (isinstance(data, Mapping) and "role" not in data)


# Every failure of a public verb is a KememError (errors.guarded): the net under the specific
# checks, for what they did not foresee. A new public verb is added here.
GUARDED_VERBS = (
    "readiness", "warm_up", "query", "flush", "cleanup", "query_simple", "prompt", "init",
    "index_file", "index_records", "index_demo", "drain", "search", "add", "get", "get_all",
    "update", "delete", "delete_all", "count", "history", "stats", "repair_history",
    "context", "end_session", "session_messages", "session_message", "list_sessions",
    "delete_session", "resume_sessions",
)  # fmt: skip
for _verb in GUARDED_VERBS:
    setattr(Kemem, _verb, guarded(getattr(Kemem, _verb)))
