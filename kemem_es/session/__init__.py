"""Conversation memory: sessions (short-term memory), batched extraction, the overview timeline,
the running summary and one token-bounded context (docs/sessions.md). No engine imports here:
the store (kemem_es/store/sessions.py, batches.py) does the engine's part."""

from kemem_es.session.manager import Outcome, SessionManager
from kemem_es.session.service import Sessions
from kemem_es.session.summary import LLMSummarizer, Summarizer
from kemem_es.session.tokens import TokenCounter, token_counter

__all__ = [
    "LLMSummarizer",
    "Outcome",
    "SessionManager",
    "Sessions",
    "Summarizer",
    "TokenCounter",
    "token_counter",
]
