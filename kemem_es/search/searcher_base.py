"""What every part of the searcher holds (engine, text side, names, the engine-side caches)
and the errors of a prefix without indices."""

from __future__ import annotations

from typing import Any

from kemem_es.contract.response import Signals
from kemem_es.engine.client import Engine
from kemem_es.errors import EngineUnavailable
from kemem_es.expand.expander import Expander
from kemem_es.models import Database
from kemem_es.search.query_text import QueryText
from kemem_es.search.rewrite import Rewriter
from kemem_es.store.bulk import TextEmbedder
from kemem_es.store.names import ScopeNames
from kemem_es.text.tokenizer import Tokenizer

# an event answer: (database, engine hit, calibrated score, signals when explained)
EventResult = tuple[Database, dict[str, Any], float, Signals | None]


def _missing_index(err: BaseException) -> bool:
    """Both clients raise a NotFoundError (HTTP 404) for a missing index."""
    return type(err).__name__ == "NotFoundError" or "index_not_found" in str(err)


def _not_initialised(prefix: str) -> EngineUnavailable:
    return EngineUnavailable(
        f"no memory indices under prefix {prefix!r}: run `kemem-es init` (or Kemem.init()) first"
    )


class SearcherBase:
    """The long-lived parts a searcher holds across queries."""

    def __init__(
        self,
        engine: Engine,
        embedder: TextEmbedder,
        tokenizer: Tokenizer,
        expander: Expander | None,
        names: ScopeNames | None = None,
    ) -> None:
        self.engine = engine
        self.text = QueryText(embedder, tokenizer, expander)
        self.names = names if names is not None else ScopeNames(engine)
        # (alias, agent, user, filters) → (when, in scope, on shard); a tuple, not a joined
        # string: ids may hold any separator ("a|b" + "c" and "a" + "b|c" shared one entry)
        self._counts: dict[tuple[str, str, str | None, str], tuple[float, int, int]] = {}
        self._calibration: dict[str, Any] | None = None
        self.rewriter: Rewriter | None = None  # QueryParams.rewrite (search.rewrite)
