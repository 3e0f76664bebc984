"""Conversation sessions (docs/sessions.md): the memory context of a chat turn, a session's
messages, ending and deleting sessions."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from kemem_es.contract.context import Appended, ContextResult, DialogueTurn, SessionInfo
from kemem_es.contract.memory import AddResult
from kemem_es.contract.response import QueryResponse
from kemem_es.errors import ExtractorNotConfigured, InvalidInput
from kemem_es.front.recall import NOW, Recall
from kemem_es.memory.inputs import AddInput
from kemem_es.runtime import lazy
from kemem_es.store import Scope
from kemem_es.store.layout import KINDS

if TYPE_CHECKING:  # loaded on first use (jieba, the model, the lexicon take seconds)
    from kemem_es.session import Sessions, Summarizer, TokenCounter


class Dialogue(Recall):
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
        from kemem_es.session.service import WindowShare
        from kemem_es.store.sessions import SessionStore

        s = self.settings
        manager = SessionManager(
            SessionStore(self.engine), s.session, lambda: self.extractor, self._summarizer,
            self.writes, lambda: self.token_counter,
        )  # fmt: skip
        return Sessions(
            manager, self._recall, lambda: self.token_counter, s.session, s.index_prefix,
            self.prepare_context, WindowShare(self._export_window, self._adopt_window),
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
            when = NOW.validate_python(now) or datetime.now().astimezone()
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
