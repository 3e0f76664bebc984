"""The running session summary: older turns compressed into a short text that keeps names,
numbers and promises, through the same LLM endpoint as extraction. With no LLM there is no
summary: the oldest turns are dropped instead, and ``context()`` says so in its notes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib import resources
from typing import Any, Protocol, runtime_checkable

from kemem_es.memory.extract.prompt import format_now, render_dialogue

PROMPT_FILE = "summary_zh.md"


@runtime_checkable
class Summarizer(Protocol):
    """Anything that folds new turns into a running summary (plug your own into Kemem)."""

    def summarize(
        self,
        previous: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        user_name: str | None,
        agent_name: str | None,
        now: datetime,
    ) -> str: ...


@runtime_checkable
class Completer(Protocol):
    """A plain chat completion (``OpenAIExtractor.complete``)."""

    def complete(self, system: str, user: str) -> str: ...


def _prompt() -> str:
    return (resources.files("kemem_es") / "prompts" / PROMPT_FILE).read_text(encoding="utf-8")


class LLMSummarizer:
    """A :class:`Summarizer` over any :class:`Completer` (the configured extractor's client)."""

    def __init__(self, completer: Completer, prompt: str | None = None) -> None:
        self.completer = completer
        self.prompt = prompt if prompt is not None else _prompt()

    def summarize(
        self,
        previous: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        user_name: str | None,
        agent_name: str | None,
        now: datetime,
    ) -> str:
        system = self.prompt.replace("{user_name}", user_name or "用户").replace(
            "{agent_name}", agent_name or "AI"
        )
        dialogue = render_dialogue(list(messages), user_name=user_name, agent_name=agent_name)
        user = (
            f"当前时间：{format_now(now)}\n\n之前的摘要：\n{previous.strip() or '（无）'}\n\n"
            f"新的对话：\n{dialogue}"
        )
        return self.completer.complete(system, user).strip()


def summarizer_for(extractor: object) -> Summarizer | None:
    """The summarizer an extractor offers: itself when it summarizes, an LLMSummarizer when it
    can complete a chat, else None (no LLM: older turns are dropped, not summarised)."""
    if isinstance(extractor, Summarizer):
        return extractor
    if isinstance(extractor, Completer):
        return LLMSummarizer(extractor)
    return None
