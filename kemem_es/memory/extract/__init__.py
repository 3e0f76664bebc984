"""``infer=True``: chat messages → entity and event records, through an LLM.

An :class:`Extractor` reads a dialogue and returns record data (docs/SPEC.md §1 fields) that already
passed the real record models, *without* scope: the caller adds ``agent_id`` / ``user_id`` (and
names, session, metadata) and writes. Extraction succeeds or fails as a whole: any bad item is an
:class:`~kemem_es.errors.ExtractionError` naming it, and nothing of that answer is returned.

The default :class:`OpenAIExtractor` talks to any OpenAI-compatible ``/chat/completions``
endpoint (OpenAI, DeepSeek, Qwen/DashScope, vLLM, Ollama, llama.cpp …) with plain ``httpx``:
one overall deadline, at most one retry (connection error or 5xx), JSON mode optional. The
prompt is a Chinese text file the operator can replace (``KEMEM_EXTRACT_PROMPT_PATH``).

Neither the dialogue, the model's answer nor the API key is ever logged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kemem_es.memory.extract.answer import parse_extraction
from kemem_es.memory.extract.base import AsyncExtractor, Extraction, Extractor, Messages
from kemem_es.memory.extract.client import OpenAIExtractor
from kemem_es.memory.extract.prompt import load_prompt, render_dialogue, render_prompt

if TYPE_CHECKING:
    from kemem_es.config import Settings

__all__ = [
    "AsyncExtractor",
    "Extraction",
    "Extractor",
    "Messages",
    "OpenAIExtractor",
    "extractor_from_settings",
    "load_prompt",
    "parse_extraction",
    "render_dialogue",
    "render_prompt",
]


def extractor_from_settings(settings: Settings) -> Extractor:
    """The default extractor for these settings (ExtractionError when no LLM is configured)."""
    return OpenAIExtractor.from_settings(settings)
