"""What a ``Kemem`` builds on first use (engine, model, tokenizer, searcher, store parts,
background writers), its scope rule, and the checks every verb starts with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kemem_es.config import Settings, get_settings
from kemem_es.config import setting_file as _setting_file
from kemem_es.engine import Engine, connect
from kemem_es.errors import Closed, EngineUnavailable, KememError, activity
from kemem_es.logs import quiet_client_logs
from kemem_es.memory import MemoryService
from kemem_es.memory.extract import Extractor
from kemem_es.memory.hooks import Hooks
from kemem_es.memory.strength import Reinforcer
from kemem_es.memory.writes import WritePaths
from kemem_es.models import Database, MemoryKind
from kemem_es.runtime import Bridge, lazy, offload
from kemem_es.store import BulkWriter, Scope
from kemem_es.store.crud import Crud
from kemem_es.store.layout import all_aliases, checked_kind
from kemem_es.store.names import ScopeNames
from kemem_es.store.nearest import Neighbours
from kemem_es.store.reinforce import Reinforcements
from kemem_es.store.templates import ensure_compatible, install_users

if TYPE_CHECKING:  # loaded on first use (jieba, the model, the lexicon take seconds)
    from kemem_es.expand import Expander
    from kemem_es.search.searcher import Searcher
    from kemem_es.session import Summarizer
    from kemem_es.store.bulk import TextEmbedder
    from kemem_es.text import Tokenizer


class Parts:
    """The lazily built parts every verb reaches through ``self``."""

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

    def _scope(self, agent_id: str | None, user_id: str | None, db: str) -> Scope:
        """The call's scope; an omitted agent is the configured default agent (never an empty
        one: ``""`` is refused like any other invalid id)."""
        agent = self.settings.default_agent_id if agent_id is None else agent_id
        return Scope.of(agent_id=agent, user_id=user_id, db=db)

    @lazy
    def engine(self) -> Engine:
        quiet_client_logs()  # the clients' tracebacks and httpx's URLs (kemem_es.logs)
        return connect(self.settings, self._bridge)

    @lazy
    def embedder(self) -> TextEmbedder:
        from kemem_es.embed import load_embedder

        return load_embedder(self.settings, self._stored_model)

    def _stored_model(self) -> str | None:
        """The model the store's indices were written with (``auto`` loads its variant); None
        without a store. An engine that cannot say now raises ``EngineUnavailable``: choosing
        by the files then would load the other variant for a store written with it, refused
        until the process restarts; the lazy embedder asks again at the next call instead."""
        from kemem_es.runtime import LoopNotRunning
        from kemem_es.store.embedding import stored

        try:
            try:
                found = stored(self.engine)
            except LoopNotRunning:
                # AsyncKemem before its loop runs (kemem-es serve loads the model first): one
                # read on a synchronous client of its own
                engine = connect(self.settings)
                try:
                    found = stored(engine)
                finally:
                    engine.client.close()
        except EngineUnavailable as exc:
            raise EngineUnavailable(
                "KEMEM_MODEL_VARIANT=auto loads the variant the store was written with, and the "
                f"engine cannot say which now ({type(exc).__name__}): the model loads at the "
                "first call that reaches it; set KEMEM_MODEL_VARIANT to load without the engine"
            ) from exc
        except KememError:  # an answer, not an outage: nothing recorded that auto can read
            return None
        model = found.get("model") if found else None
        return model if isinstance(model, str) else None

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

    @lazy
    def reinforcer(self) -> Reinforcer:
        """Background strength updates (and user activity); created on first use."""
        install_users(self.engine)
        s = self.settings
        return Reinforcer(
            Reinforcements(self.engine),
            s.reinforce_amount,
            s.reinforce_flush_s,
            s.reinforce_coalesce_s,
        )

    @lazy
    def calibration(self) -> dict[str, Any] | None:
        """The configured model's vector scale (embed.calibrate), measured once per process;
        None for a caller's own embedder object (the reference constants apply)."""
        from kemem_es.embed.calibrate import for_embedder

        return for_embedder(self.embedder)

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
