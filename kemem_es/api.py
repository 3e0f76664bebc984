"""The Python entry point: one object that sets up, indexes and queries."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from kemem_es.config import Settings, get_settings
from kemem_es.engine import Engine, connect
from kemem_es.engine.templates import InitResult, install
from kemem_es.ingest import Indexer, IndexReport
from kemem_es.models import Database, MemoryKind, MemoryRecord
from kemem_es.search.params import QueryParams
from kemem_es.search.response import QueryResponse, SimpleResponse

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
        params = QueryParams(user_id=user_id, agent_id=agent_id, **options)
        return self.searcher.query(text, params)

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
        """Install index templates and indices (idempotent)."""
        return install(self.engine, self.embedder.dim, recreate=recreate)

    def _indexer(self) -> Indexer:
        return Indexer(self.engine, self.embedder, self.tokenizer, self.settings.embed_batch * 8)

    def index_file(
        self,
        path: Path,
        kind: MemoryKind,
        db: Database = "user",
        skip_invalid: bool = False,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> IndexReport:
        """Validate + index a JSONL file; raises InvalidInput (nothing written) on bad records."""
        return self._indexer().index_file(Path(path), kind, db, skip_invalid, on_progress)

    def index_records(
        self, records: Sequence[MemoryRecord], kind: MemoryKind, db: Database = "user"
    ) -> IndexReport:
        return self._indexer().index_records(records, kind, db)

    def index_demo(
        self, files: Iterable[tuple[str, MemoryKind, Database]] = DEMO_FILES
    ) -> dict[str, IndexReport]:
        """Index the bundled demo corpus (templates installed first)."""
        self.init()
        return {name: self.index_file(demo_path(name), kind, db) for name, kind, db in files}
