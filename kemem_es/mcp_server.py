"""An MCP server (Model Context Protocol, the official ``mcp`` SDK, extra ``kemem-es[mcp]``):
tools ``remember``, ``recall``, ``context``, ``forget``, ``list_memories`` over one
:class:`AsyncKemem`.

Two ways in:

- ``kemem-es mcp``: stdio, for a desktop agent that starts it. Its scope is configured, not
  asked: ``--agent`` (default ``KEMEM_DEFAULT_AGENT_ID``) is the only agent its tools may
  touch, and ``--user`` pins the user (then a tool's ``user_id`` may be omitted, and another
  one is refused).
- ``kemem-es serve``: streamable HTTP at ``/mcp`` (stateless, JSON answers). A keyed server
  takes ``Authorization: Bearer <key>`` there as everywhere and the key's agents bound the
  tools; a keyless loopback server serves any agent.

A tool's ``agent_id`` only chooses among the agents the configuration or the key allows, so a
model that writes another agent's id into a call gets an error, never that agent's memories.
Arguments are validated by their schema (types and ranges as the HTTP API's) and then by the
library, whose ``InvalidInput`` comes back as the tool's error naming the field.

Importing this module needs the ``mcp`` package (its tools' signatures name the SDK's types).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from kemem_es.errors import InvalidInput, KememError, NotFound

if TYPE_CHECKING:
    from kemem_es.async_kemem import AsyncKemem

INSTRUCTIONS = (
    "Long-term memory of a companion chat. Call recall with the user's latest message before "
    "answering (its prompt text can go into your context as it is); call remember with what "
    "the user said that is worth keeping; forget deletes one memory by its id."
)


@dataclass(frozen=True)
class McpScope:
    """Who a call may touch: ``agents`` None means any agent; ``user`` pins the user."""

    default_agent: str
    agents: frozenset[str] | None = None
    user: str | None = None

    def agent(self, agent_id: str | None) -> str:
        agent = agent_id or self.default_agent
        if self.agents is not None and agent not in self.agents:
            raise InvalidInput(
                f"agent_id: {agent!r} is not an agent this server (or its API key) may serve",
                field="agent_id",
            )
        return agent

    def user_of(self, user_id: str | None) -> str:
        if self.user is not None:
            if user_id not in (None, "", self.user):
                raise InvalidInput(
                    "user_id: this server serves one configured user, not another",
                    field="user_id",
                )
            return self.user
        if not user_id:
            raise InvalidInput(
                "user_id: required (the user whose memories these are)", field="user_id"
            )
        return user_id


UserId = Annotated[
    str | None, Field(min_length=1, max_length=512, description="the user (the chat's end user)")
]
AgentId = Annotated[
    str | None,
    Field(min_length=1, max_length=512, description="the agent; default: the configured one"),
]


def _item(hit: dict[str, Any]) -> dict[str, Any]:
    return {k: hit[k] for k in ("id", "memory", "score", "kind")}


def build_mcp(
    kemem: Callable[[], AsyncKemem],
    scope_of: Callable[[Any], McpScope],
    hide: Callable[[str], str] = lambda text: text,
) -> MCPServer:
    """The MCP server. ``kemem()`` gives the AsyncKemem at call time; ``scope_of(ctx)`` the
    caller's scope from the request context (its headers over HTTP); ``hide`` takes what an
    error message must not show (the engine's address)."""
    server: MCPServer = MCPServer("kemem-es", instructions=INSTRUCTIONS)

    def failed(exc: KememError) -> ToolError:
        field = f" (field {exc.field})" if isinstance(exc, InvalidInput) and exc.field else ""
        kind = "not_found" if isinstance(exc, NotFound) else type(exc).__name__
        return ToolError(f"{kind}{field}: {hide(str(exc))}")

    @server.tool()
    async def remember(
        text: Annotated[str, Field(min_length=1, max_length=20_000, description="what to keep")],
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        session_id: Annotated[str | None, Field(max_length=512)] = None,
    ) -> dict[str, Any]:
        """Store one memory (a fact, an event the user told) for the user; a near-duplicate
        of an existing memory updates it. Returns what was stored and the action taken."""
        scope = scope_of(ctx)
        try:
            results = await kemem().add(
                text,
                user_id=scope.user_of(user_id),
                agent_id=scope.agent(agent_id),
                session_id=session_id,
                refresh=True,
            )
        except KememError as exc:
            raise failed(exc) from None
        return {
            "results": [{"id": r.id, "event": r.event, "memory": r.memory.text} for r in results]
        }

    @server.tool()
    async def recall(
        query: Annotated[str, Field(min_length=1, max_length=4_000, description="the message")],
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 5,
        threshold: Annotated[float | None, Field(ge=0, le=1)] = None,
        context: Annotated[
            str | None, Field(max_length=20_000, description="earlier turns, one a line")
        ] = None,
    ) -> dict[str, Any]:
        """Recall the user's memories relevant to a message: ``prompt`` is the text to put in
        the model's context as it is, ``items`` the memories (id, memory, score, kind)."""
        scope = scope_of(ctx)
        km = kemem()
        options: dict[str, Any] = {"context": context} if context else {}
        try:
            resp = await km.search(
                query,
                user_id=scope.user_of(user_id),
                agent_id=scope.agent(agent_id),
                limit=limit,
                threshold=threshold,
                **options,
            )
            prompt = km.prompt(resp)
        except KememError as exc:
            raise failed(exc) from None
        out: dict[str, Any] = {"prompt": prompt, "items": [_item(h) for h in resp.results]}
        if resp.additional_info.degraded:
            out["degraded"] = hide(resp.additional_info.degraded_reason or "degraded")
        return out

    @server.tool()
    async def context(
        message: Annotated[str, Field(min_length=1, max_length=4_000, description="the message")],
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        session_id: Annotated[str | None, Field(max_length=512)] = None,
        max_tokens: Annotated[int | None, Field(ge=1, le=100_000)] = None,
    ) -> dict[str, Any]:
        """The memory context of a chat turn within a token budget: the session's recent
        turns and summary, the overview timeline and the recalled details, as one prompt
        ``text`` (put it in the model's context as it is) with its token counts."""
        scope = scope_of(ctx)
        try:
            result = await kemem().context(
                message,
                user_id=scope.user_of(user_id),
                agent_id=scope.agent(agent_id),
                session_id=session_id,
                max_tokens=max_tokens,
            )
        except KememError as exc:
            raise failed(exc) from None
        out: dict[str, Any] = {"text": result.text, "tokens": result.tokens.model_dump()}
        if result.degraded:
            out["degraded"] = hide(result.degraded)
        return out

    @server.tool()
    async def forget(
        memory_id: Annotated[str, Field(min_length=1, max_length=512)],
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
    ) -> dict[str, Any]:
        """Delete one of the user's memories by its id (as recall or list_memories gave it)."""
        scope = scope_of(ctx)
        try:
            gone = await kemem().delete(
                memory_id,
                user_id=scope.user_of(user_id),
                agent_id=scope.agent(agent_id),
                refresh=True,
            )
        except KememError as exc:
            raise failed(exc) from None
        return {"deleted": gone.id, "memory": gone.text}

    @server.tool()
    async def list_memories(
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        kind: Literal["events", "entities"] | None = None,
        limit: Annotated[int, Field(ge=1, le=1000)] = 20,
        cursor: Annotated[str | None, Field(max_length=4096)] = None,
    ) -> dict[str, Any]:
        """The user's memories, newest first; pass next_cursor back for the next page."""
        scope = scope_of(ctx)
        try:
            page = await kemem().get_all(
                user_id=scope.user_of(user_id),
                agent_id=scope.agent(agent_id),
                kind=kind,
                limit=limit,
                cursor=cursor,
            )
        except KememError as exc:
            raise failed(exc) from None
        return {
            "results": [
                {"id": m.id, "kind": m.kind, "memory": m.text, "updatetime": m.updatetime}
                for m in page.results
            ],
            "next_cursor": page.next_cursor,
        }

    return server


def http_mcp(app: Any) -> MCPServer:
    """The MCP server of a ``kemem-es serve`` app: its AsyncKemem; the scope from the caller's
    key (the app's KeyRing; keyless: any agent)."""
    from kemem_es.server.errors import hide_engine

    def scope_of(ctx: Any) -> McpScope:
        headers = ctx.headers or {}
        access = app.state.keyring.access(headers.get("authorization"))
        return McpScope(app.state.kemem.settings.default_agent_id, access.agents)

    def hide(text: str) -> str:
        return hide_engine(text, app.state.kemem.settings.url)

    return build_mcp(lambda: app.state.kemem, scope_of, hide)


def run_stdio(user: str | None = None, agent: str | None = None) -> None:
    """``kemem-es mcp``: serve on stdin/stdout until the client closes them."""
    import anyio

    from kemem_es.async_kemem import AsyncKemem

    km = AsyncKemem()
    default = agent or km.settings.default_agent_id
    scope = McpScope(default, frozenset({default}), user)
    server = build_mcp(lambda: km, lambda _: scope)

    async def main() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await km.aclose()

    anyio.run(main)
