"""What a query's text becomes before any engine request: its search words (base words, context
words, sub-words, pruned expansions, entity bridges) and its vectors (utterance, dialogue window,
sentences). Needs the tokenizer, the lexicon and the model, never the engine: the scope's names
are handed to it (``store.names``: kept whole, and its user's and agent's never searched)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from kemem_es.bounded import Bounded
from kemem_es.contract.params import QueryParams
from kemem_es.expand.expander import Expander
from kemem_es.search import shared_window
from kemem_es.search.clauses import SearchWord, matched_words
from kemem_es.search.stopwatch import Stopwatch
from kemem_es.search.turn_vectors import (
    TurnCache,
    missing_turns,
    turn_pieces,
)
from kemem_es.search.window_scale import pieces_mean, rebuilt_blend
from kemem_es.store.bulk import TextEmbedder
from kemem_es.store.names import NO_NAMES, Names
from kemem_es.text import BaseWord, base_words_with_tokens, normalize
from kemem_es.text.dialogue import Turn, dialogue_window, keep_end, sentences, window_turns
from kemem_es.text.tokenizer import Tokenizer

WORD_CACHE_SIZE = 50_000
CONTEXT_CACHE_SIZE = 4_096  # dialogue windows: ~2 KB of vector each
WINDOW_TEXT_CACHE_SIZE = 256  # earlier turns' window texts (a context builds one twice)
LENGTH_CACHE_SIZE = 8_192  # turns' model tokens (each turn is measured in every later window)
CONTEXT_LEVEL = 4  # bm25 mode: words from the previous turns weigh like a mid-level association
CONTEXT_WORDS_PER_TURN = 5
MAX_BRIDGES = 2
ENTITY_TEXT_FIELDS = [
    "keyword",
    "keyword_tok",
    "entity_name",
    "entity_name_tok",
    "description_tok",
]
# The model reads at most 256 tokens (about one per Han character): the dialogue window keeps
# the newest turns within EMBED_MAX_TOKENS of them (counted by the embedder's tokenizer, or as
# characters for an embedder that cannot count) instead of letting the tokenizer cut the end.
# An utterance longer than EMBED_MAX_CHARS keeps its end.
EMBED_MAX_CHARS = 250
EMBED_MAX_TOKENS = 250

# (base words, the utterance's tokens, expansions with their level, every search word)
Words = tuple[list[BaseWord], list[str], list[tuple[str, int]], list[SearchWord]]


class QueryVectors(NamedTuple):
    """A query's vectors: the whole utterance's (blended with the dialogue window), whether the
    window dropped earlier turns, the sentences' vectors, and the factor the engine's cosine of
    them is read at (``search.window_scale``: below 1 only for the window ``"split"`` rebuilds
    from its pieces, so that its scores sit on the joint window's scale)."""

    vector: list[float]
    trimmed: bool
    parts: list[list[float]]
    scale: float = 1.0


class QueryText:
    """Holds the text-side parts across queries, with the caches that make them cheap: each
    lexicon word's tokens and vector (the same associations recur from query to query)."""

    def __init__(
        self, embedder: TextEmbedder, tokenizer: Tokenizer, expander: Expander | None
    ) -> None:
        self.embedder = embedder
        self.tokenizer = tokenizer
        self.expander = expander
        self._word_tokens: Bounded[tuple[str, frozenset[str]], tuple[str, ...]] = Bounded(
            WORD_CACHE_SIZE
        )
        self._word_vectors: Bounded[str, np.ndarray] = Bounded(WORD_CACHE_SIZE)
        # earlier-turn windows → their vectors (context_vector="earlier")
        self._context_vectors: Bounded[str, np.ndarray] = Bounded(CONTEXT_CACHE_SIZE)
        # earlier turns → their window's text and whether turns were dropped (earlier_window)
        self._windows: Bounded[tuple[Turn, ...], tuple[str, bool]] = Bounded(WINDOW_TEXT_CACHE_SIZE)
        self._lengths: Bounded[str, int] = Bounded(LENGTH_CACHE_SIZE)
        # each utterance's and turn's own vector (context_vector="turns"; search.turn_vectors)
        self.turn_vectors = TurnCache()

    def scoped(self, params: QueryParams, names: Names, turns: Sequence[Turn] = ()) -> Tokenizer:
        """The tokenizer for this query: the scope's names, the caller's ``user_name`` and
        ``agent_name`` and the context's speaker labels kept whole (in this query only)."""
        extra = set(_query_names(params, turns)) - names.words
        return self.tokenizer.scoped(names.words | extra if extra else names.words)

    def tokens(self, word: str, tok: Tokenizer) -> tuple[str, ...]:
        """A search word's tokens, as the index has them; lexicon words recur, so cached."""
        key = (word, tok.names)
        toks = self._word_tokens.peek(key)  # dozens a query (the oldest put goes first)
        if toks is None:
            toks = tuple(t.lower() for t in tok.tokenize(word))
            self._word_tokens.put(key, toks)
        return toks

    def word_vectors(self, words: Sequence[str]) -> np.ndarray:
        """Embeddings of lexicon words, cached. Read into a local dict first: another thread's
        query may evict a word (when the cache is full) while this one embeds."""
        found: dict[str, np.ndarray] = {}
        for w in dict.fromkeys(words):
            v = self._word_vectors.get(w)
            if v is not None:
                found[w] = v
        missing = [w for w in dict.fromkeys(words) if w not in found]
        if missing:
            for w, v in zip(missing, self.embedder.embed(missing), strict=True):
                found[w] = np.asarray(v, dtype=np.float32)
            self._word_vectors.update((w, found[w]) for w in missing)
        return np.stack([found[w] for w in words])

    def prune_expansions(
        self, expanded: list[tuple[str, int]], vector: Sequence[float], params: QueryParams
    ) -> list[tuple[str, int]]:
        """Meaning-aware pruning (docs/SPEC.md §3's weakness: words expanded independently of the
        sentence): the lexicon's candidates are ranked by level, the best ``expand_candidates``
        are embedded (cached per word) and only those whose cosine to the query vector reaches
        ``expand_min_cos`` are kept — 吃火锅 keeps 火锅/麻辣烫, drops 狗肉/熏肉 unless the
        sentence is about them."""
        if not expanded or params.expand_min_cos <= -1.0:
            return expanded
        head = expanded[: params.expand_candidates]
        sims = self.word_vectors([w for w, _ in head]) @ np.asarray(vector, dtype=np.float32)
        return [e for e, c in zip(head, sims, strict=True) if c >= params.expand_min_cos]

    def words(
        self,
        text: str,
        params: QueryParams,
        clock: Stopwatch,
        turns: Sequence[Turn] = (),
        vector: Sequence[float] | None = None,
        names: Names = NO_NAMES,
    ) -> Words:
        """Base words of the utterance (TF-IDF, weight = TF-IDF), context words (each earlier
        turn's top words, weight × ``context_decay`` per turn back), their sub-words, then the
        expansions of the utterance's base words. Names — the caller's, the scope's user and
        agent (``names.persons``), speaker labels — are never search words; another tenant's
        user called 小雨 or Sam leaves 小雨 and Sam to this one's queries."""
        tok = self.scoped(params, names, turns)
        exclude = set(_query_names(params, turns)) | names.persons
        idf = self.expander.idf if self.expander is not None else None
        base, tokens = base_words_with_tokens(text, params.top_k, exclude, tok, idf)
        seen = {b.word for b in base}
        ctx: list[tuple[BaseWord, float]] = []
        weight = 1.0
        for turn in turns:  # newest first
            weight *= params.context_decay
            if weight <= 0:
                break
            picked = base_words_with_tokens(turn.text, CONTEXT_WORDS_PER_TURN, exclude, tok, idf)[0]
            for b in picked:
                if b.word not in seen:
                    seen.add(b.word)
                    ctx.append((b, weight))
        clock.lap("tokenise")
        expanded: list[tuple[str, int]] = []
        # Expansion policy: one-character base words still search (keyword fields only) but
        # are not expanded; their associations (吃 → 好吃, 嘴馋) are mostly noise.
        targets = [b.word for b in base if not b.single_char]
        if self.expander is not None and params.expand and params.max_words > 0 and targets:
            result = self.expander.expand_words(
                targets,
                max_words=params.max_words,
                strategy=params.strategy,
                filter_levels=params.filter_levels,
                skip=sorted(exclude),
            )
            expanded = [(e.word, e.level) for e in result]
            if vector is not None:
                expanded = self.prune_expansions(expanded, vector, params)
        words: list[SearchWord] = []
        taken: set[str] = set()

        def add(word: str, level: int | None, weight: float, earlier: bool = False) -> None:
            if word in taken:
                return
            taken.add(word)
            toks = self.tokens(word, tok)  # tokenised once, as the index was
            subs = tuple(tok.subwords(toks[0])) if len(toks) == 1 else ()
            one = len(word) == 1
            words.append(SearchWord(word, level, one, toks, weight, subs, earlier, earlier))

        for b in base:
            add(b.word, None, b.weight)
        for b, w in ctx:
            add(b.word, CONTEXT_LEVEL, b.weight * w, earlier=True)
        for word, level in expanded:
            add(word, level, 0.0)
        clock.lap("expand")
        return base, tokens, expanded, words

    def bridge_words(
        self,
        params: QueryParams,
        words: list[SearchWord],
        entities: Sequence[tuple[dict[str, Any], float]],
        names: Names = NO_NAMES,
    ) -> list[SearchWord]:
        """Names of the concrete entities the utterance is about become search words for the
        events: "我那只狗" is about 豆包 when the user's entity memories say 豆包 is her corgi,
        and her events say 豆包, not 狗. Only strong evidence of meaning bridges (score ≥
        ``bridge_threshold`` with no word in common), at most ``MAX_BRIDGES`` names, weighted
        like the utterance's strongest word; names the query already has and the user's and
        agent's own names are left out."""
        if params.bridge_threshold >= 1.0:
            return []
        taken = {w.word for w in words} | names.persons
        tok = self.scoped(params, names)
        top = max((w.weight for w in words if w.level is None), default=1.0)
        out: list[SearchWord] = []
        for hit, score in sorted(entities, key=lambda hs: -hs[1]):
            src = hit["_source"]
            name = normalize(src.get("entity_name") or "").strip()
            if (
                score < params.bridge_threshold
                or src.get("entity_type") != "具体实体"
                or src.get("kind") == "记忆画面"
                or len(name) < 2
                or name in taken
                # only what the utterance means without saying it: an entity that shares a
                # word with the query is already found through that word
                or matched_words(src, words, ENTITY_TEXT_FIELDS)
            ):
                continue
            taken.add(name)
            toks = self.tokens(name, tok)
            out.append(SearchWord(name, CONTEXT_LEVEL, False, toks, top, (), context=True))
            if len(out) >= MAX_BRIDGES:
                break
        return out

    def query_vector(
        self, text: str, turns: Sequence[Turn], params: QueryParams
    ) -> tuple[list[float], bool, list[list[float]]]:
        """``query_vectors`` without the factor its cosines are read at."""
        vector, trimmed, parts, _ = self.query_vectors(text, turns, params)
        return vector, trimmed, parts

    def query_vectors(self, text: str, turns: Sequence[Turn], params: QueryParams) -> QueryVectors:
        """The utterance's vector, blended with the dialogue window's (the newest turns that
        fit the model, oldest first) when there is context: w·u + (1−w)·d, renormalised.
        Returns the vector, whether the window had to drop earlier turns (not whether the
        utterance alone was cut to its end: no turn is dropped then), the vectors of the
        utterance's sentences when it has several (blended with the window the same way) and
        the factor the engine's cosine of them is read at: a window rebuilt from its pieces
        lifts every cosine, which search.window_scale takes back for ``"split"`` (the searcher
        divides the query's vector floor and ceiling by it); ``"turns"`` keeps its lift."""
        utterance = keep_end(text, EMBED_MAX_CHARS)
        pieces = sentences(utterance, params.max_sentences) if params.sentence_weight > 0 else []
        if not turns or params.utterance_weight >= 1.0:
            # one model call for the utterance and its sentences
            u, *parts = self._embed_utterance(utterance, pieces)
            return QueryVectors(_rounded(u), False, [_rounded(p) for p in parts])
        w = utterance_weight(params, utterance, turns)
        if params.context_vector in ("turns", "split"):
            if params.context_vector == "turns":
                u, vecs, sizes, tparts, cut = self.turns_window(text, utterance, turns, pieces)
            else:  # the joint window, rebuilt from its two parts
                u, d, tparts, cut, window = self._earlier(utterance, turns, pieces)
                vecs, sizes = [u, d], [self.length(utterance), self.length(window)]
            r = pieces_mean(vecs, sizes)
            # the earlier turns' share of the tokens; "turns" keeps its lift for now (the rule
            # was measured for split only: bench/results/2026-11-29-lift)
            share = (
                1.0 - sizes[0] / max(sum(sizes), 1e-9) if params.context_vector == "split" else 0.0
            )
            vector, scale = rebuilt_blend(u, r, w, share)
            sent = [rebuilt_blend(p, r, w, share)[0] for p in tparts]
            return QueryVectors(_rounded(vector), cut, [_rounded(p) for p in sent], scale)
        if params.context_vector == "earlier":
            u, d, parts, cut, _ = self._earlier(utterance, turns, pieces)
            return QueryVectors(
                _rounded(_blend(u, d, w)), cut, [_rounded(_blend(p, d, w)) for p in parts]
            )
        window, cut = dialogue_window(text, list(turns), EMBED_MAX_TOKENS, self.length)
        u, d, *parts = self._embed_utterance(utterance, [window, *pieces])
        return QueryVectors(
            _rounded(_blend(u, d, w)), cut, [_rounded(_blend(p, d, w)) for p in parts]
        )

    def _earlier(
        self, utterance: str, turns: Sequence[Turn], pieces: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray], bool, str]:
        """(the utterance's vector, the earlier turns' window's — cached or prepared, else in
        the utterance's model call —, the sentences', whether turns were dropped, the
        window's text)."""
        window, cut = self.earlier_window(turns)
        d = self._cached(window)
        if d is None:  # not prepared: in the same model call as the utterance
            u, d, *parts = self._embed_utterance(utterance, [window, *pieces])
            self._remember(window, d)
        else:
            u, *parts = self._embed_utterance(utterance, pieces)
        return u, d, list(parts), cut, window

    def utterance_vector(self, text: str) -> list[float] | None:
        """The utterance's own vector as ``query_vector`` just computed it (kept for the next
        queries' windows), without a model call: None when it is no longer cached."""
        utterance = keep_end(text, EMBED_MAX_CHARS)
        vec = self.turn_vectors.found([utterance]).get(utterance)
        return None if vec is None else vec.tolist()

    def _embed_utterance(self, utterance: str, more: Sequence[str]) -> np.ndarray:
        """The utterance and ``more`` in one model call; the utterance's vector is kept for
        the next queries, whose earlier turn it becomes (``turns_window``)."""
        vecs = self.embed_queries([utterance, *more])
        self.turn_vectors.put(utterance, np.asarray(vecs[0], dtype=np.float32))
        return vecs.astype(float)

    def turns_window(
        self, text: str, utterance: str, turns: Sequence[Turn], pieces: Sequence[str]
    ) -> tuple[np.ndarray, list[np.ndarray], list[float], list[np.ndarray], bool]:
        """``context_vector="turns"``: the window made of its pieces' own vectors
        (search.turn_vectors), the turns the joint window would hold (``window_turns``). The
        turns not cached yet are embedded in the utterance's model call. Returns the
        utterance's vector, the window's pieces' vectors and tokens, the sentences' vectors
        and whether turns were dropped."""
        sizes: dict[str, int] = {}

        def length(t: str) -> int:
            if t not in sizes:
                sizes[t] = self.length(t)
            return sizes[t]

        kept, cut = window_turns(text, list(turns), EMBED_MAX_TOKENS, length)
        found, todo = missing_turns(kept, self.turn_vectors)
        u, *rest = self._embed_utterance(utterance, [*todo, *pieces])
        for t, v in zip(todo, rest, strict=False):
            found[t] = v
            self.turn_vectors.put(t, np.asarray(v, dtype=np.float32))
        vecs, tokens = turn_pieces((utterance, u), kept, found, length)
        return u, vecs, tokens, list(rest[len(todo) :]), cut

    def earlier_window(self, turns: Sequence[Turn]) -> tuple[str, bool]:
        """The earlier turns alone (oldest first, the newest that fit the model): the text
        whose vector ``context_vector="earlier"`` blends with the utterance's. Kept for the
        same turns: a session's context builds it to adopt a shared window, then its recall
        to use it, and both count every turn's tokens."""
        key = tuple(turns)
        found = self._windows.get(key)
        if found is None:
            window, cut = dialogue_window("", list(turns), EMBED_MAX_TOKENS, self.length)
            found = (window.rstrip("\n"), cut)
            self._windows.put(key, found)
        return found

    def prepare_context(self, turns: Sequence[Turn], context_vector: str = "earlier") -> bool:
        """Compute and cache the vectors a query with these earlier turns will need, now
        (after the agent's reply, before the user's next turn), so that query embeds its
        utterance only: the earlier turns' window vector (``"earlier"``) or each turn's own
        vector not cached yet (``"turns"``; ``"joint"`` has nothing to prepare). Returns
        whether anything had to be computed."""
        if not turns or context_vector == "joint":
            return False
        # "split" prepares what "earlier" does: the earlier turns' window
        if context_vector == "turns":
            kept, _ = window_turns("", list(turns), EMBED_MAX_TOKENS, self.length)
            _, todo = missing_turns(kept, self.turn_vectors)
            if not todo:
                return False
            for t, v in zip(todo, self.embed_queries(todo), strict=True):
                self.turn_vectors.put(t, np.asarray(v, dtype=np.float32))
            return True
        window, _ = self.earlier_window(turns)
        if self._cached(window) is not None:
            return False
        self._remember(window, self.embed_queries([window])[0].astype(float))
        return True

    def export_window(self, turns: Sequence[Turn]) -> dict[str, Any] | None:
        """The earlier turns' window vector, when prepared here, as a record another process
        can adopt (search.shared_window)."""
        window, _ = self.earlier_window(turns)
        vec = self._cached(window)
        return None if vec is None else shared_window.record(window, vec, self.embedder.name)

    def adopt_window(self, turns: Sequence[Turn], rec: Mapping[str, Any]) -> bool:
        """Cache a window vector another process prepared, when it is these turns' window by
        this model; whether it was adopted."""
        window, _ = self.earlier_window(turns)
        if self._cached(window) is not None:
            return False
        vec = shared_window.vector_of(rec, window, self.embedder.name, self.embedder.dim)
        if vec is None:
            return False
        self._remember(window, vec)
        return True

    def _cached(self, window: str) -> np.ndarray | None:
        return self._context_vectors.get(window)

    def _remember(self, window: str, vec: np.ndarray) -> None:
        self._context_vectors.put(window, vec)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query-side texts in one call, with the model's query prefix when it has one
        (``embed_queries``; a caller's own embedder without it: ``embed``)."""
        embed = getattr(self.embedder, "embed_queries", None) or self.embedder.embed
        return np.asarray(embed(list(texts)))

    def length(self, text: str) -> int:
        """A text's share of the model's input: its tokens (English words take one to four
        each, so 250 characters held a third of what the model reads), else its characters."""
        count = getattr(self.embedder, "count_tokens", None)
        if count is None:
            return len(text)
        n = self._lengths.peek(text)  # a turn is measured again in each later turn's window
        if n is None:
            n = count([text])[0]
            self._lengths.put(text, n)
        return n


def _query_names(params: QueryParams, turns: Sequence[Turn]) -> list[str]:
    """Names this query brings: the caller's user and agent names, the speaker labels."""
    given = [params.user_name, params.agent_name, *(t.speaker for t in turns)]
    return [normalize(n).strip() for n in given if n]


def utterance_weight(params: QueryParams, utterance: str, turns: Sequence[Turn]) -> float:
    """The utterance's weight in the query vector: ``utterance_weight``, raised to
    ``utterance_share_weight`` × the utterance's share of the dialogue's characters when that is
    more (a last turn that tells the episode itself outweighs the turns before it)."""
    if params.utterance_share_weight <= 0:
        return params.utterance_weight
    total = len(utterance) + sum(len(t.text) for t in turns[: params.context_turns])
    share = len(utterance) / total if total else 1.0
    return max(params.utterance_weight, min(1.0, params.utterance_share_weight * share))


def _blend(u: np.ndarray, d: np.ndarray, w: float) -> np.ndarray:
    vec = w * u + (1.0 - w) * d
    return vec / max(float(np.linalg.norm(vec)), 1e-12)


def _rounded(vec: np.ndarray) -> list[float]:
    """Five decimals keep cosines exact to ~1e-5 and halve the JSON the request carries."""
    return np.round(vec, 5).tolist()
