"""Association lexicon and expander (docs/SPEC.md §2 step 3, §3)."""

from kemem_es.expand.expander import (
    ExpandedWord,
    Expander,
    Expansion,
    default_expander,
    pooled,
    round_robin,
)
from kemem_es.expand.lexicon import DEFAULT_LEXICON_PATH, Lexicon, default_lexicon

__all__ = [
    "DEFAULT_LEXICON_PATH",
    "ExpandedWord",
    "Expander",
    "Expansion",
    "Lexicon",
    "default_expander",
    "default_lexicon",
    "pooled",
    "round_robin",
]
