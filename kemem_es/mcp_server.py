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

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from kemem_es.errors import Forbidden, InvalidInput, KememError, NotFound
from kemem_es.server.access import OPEN, Access

if TYPE_CHECKING:
    from kemem_es.async_kemem import AsyncKemem

INSTRUCTIONS = (
    "Long-term memory of a companion chat. Call recall with the user's latest message before "
    "answering (its prompt text can go into your context as it is); call remember with what "
    "the user said that is worth keeping; forget deletes one memory by its id."
)
T = TypeVar("T")


class ScopeKw(TypedDict):
    user_id: str
    agent_id: str


@dataclass(frozen=True)
class McpScope:
    """Who a call may touch: ``access`` the agents (the HTTP API's rule, ``server/access.py``);
    ``user`` pins the user."""

    default_agent: str
    access: Access = OPEN
    user: str | None = None

    def agent(self, agent_id: str | None) -> str:
        return self.access.agent(agent_id, self.default_agent)

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

    def kw(self, user_id: str | None, agent_id: str | None) -> ScopeKw:
        """The call's scope as the library's keyword arguments, checked."""
        return {"user_id": self.user_of(user_id), "agent_id": self.agent(agent_id)}


UserId = Annotated[
    str | None, Field(min_length=1, max_length=512, description="the user (the chat's end user)")
]
AgentId = Annotated[
    str | None,
    Field(min_length=1, max_length=512, description="the agent; default: the configured one"),
]
SessionId = Annotated[str | None, Field(max_length=512)]


def _item(hit: dict[str, Any]) -> dict[str, Any]:
    return {k: hit[k] for k in ("id", "memory", "score", "kind")}


@dataclass(frozen=True)
class Calls:
    """How every tool runs: the caller's scope from the request context, the library call,
    a library error as the tool's error (naming the field; the engine's address hidden)."""

    kemem: Callable[[], AsyncKemem]
    scope_of: Callable[[Any], McpScope]
    hide: Callable[[str], str]

    def failed(self, exc: KememError) -> ToolError:
        named = exc.field if isinstance(exc, InvalidInput | Forbidden) else None
        field = f" (field {named})" if named else ""
        kind = "not_found" if isinstance(exc, NotFound) else type(exc).__name__
        return ToolError(f"{kind}{field}: {self.hide(str(exc))}")

    async def run(
        self,
        ctx: Context,
        user_id: str | None,
        agent_id: str | None,
        call: Callable[[AsyncKemem, ScopeKw], Awaitable[T]],
    ) -> T:
        try:
            return await call(self.kemem(), self.scope_of(ctx).kw(user_id, agent_id))
        except KememError as exc:
            raise self.failed(exc) from None


def _memory_tools(server: MCPServer, calls: Calls) -> None:
    """remember, forget, list_memories."""

    @server.tool()
    async def remember(
        text: Annotated[str, Field(min_length=1, max_length=20_000, description="what to keep")],
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        session_id: SessionId = None,
    ) -> dict[str, Any]:
        """Store one memory (a fact, an event the user told) for the user; a near-duplicate
        of an existing memory updates it. Returns what was stored and the action taken."""
        results = await calls.run(
            ctx, user_id, agent_id,
            lambda km, scope: km.add(text, **scope, session_id=session_id, refresh=True),
        )  # fmt: skip
        return {
            "results": [{"id": r.id, "event": r.event, "memory": r.memory.text} for r in results]
        }

    @server.tool()
    async def forget(
        memory_id: Annotated[str, Field(min_length=1, max_length=512)],
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
    ) -> dict[str, Any]:
        """Delete one of the user's memories by its id (as recall or list_memories gave it)."""
        gone = await calls.run(
            ctx, user_id, agent_id, lambda km, scope: km.delete(memory_id, **scope, refresh=True)
        )
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
        page = await calls.run(
            ctx, user_id, agent_id,
            lambda km, scope: km.get_all(**scope, kind=kind, limit=limit, cursor=cursor),
        )  # fmt: skip
        return {
            "results": [
                {"id": m.id, "kind": m.kind, "memory": m.text, "updatetime": m.updatetime}
                for m in page.results
            ],
            "next_cursor": page.next_cursor,
        }


def _recall_tools(server: MCPServer, calls: Calls) -> None:
    """recall, context."""

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
        options: dict[str, Any] = {"context": context} if context else {}

        async def search(km: AsyncKemem, scope: ScopeKw) -> tuple[Any, str]:
            resp = await km.search(query, **scope, limit=limit, threshold=threshold, **options)
            return resp, km.prompt(resp)

        resp, prompt = await calls.run(ctx, user_id, agent_id, search)
        out: dict[str, Any] = {"prompt": prompt, "items": [_item(h) for h in resp.results]}
        if resp.additional_info.degraded:
            out["degraded"] = calls.hide(resp.additional_info.degraded_reason or "degraded")
        return out

    @server.tool()
    async def context(
        message: Annotated[str, Field(min_length=1, max_length=4_000, description="the message")],
        ctx: Context,
        user_id: UserId = None,
        agent_id: AgentId = None,
        session_id: SessionId = None,
        max_tokens: Annotated[int | None, Field(ge=1, le=100_000)] = None,
    ) -> dict[str, Any]:
        """The memory context of a chat turn within a token budget: the session's recent
        turns and summary, the overview timeline and the recalled details, as one prompt
        ``text`` (put it in the model's context as it is) with its token counts."""
        result = await calls.run(
            ctx, user_id, agent_id,
            lambda km, scope: km.context(
                message, **scope, session_id=session_id, max_tokens=max_tokens
            ),
        )  # fmt: skip
        out: dict[str, Any] = {"text": result.text, "tokens": result.tokens.model_dump()}
        if result.degraded:
            out["degraded"] = calls.hide(result.degraded)
        return out


def build_mcp(
    kemem: Callable[[], AsyncKemem],
    scope_of: Callable[[Any], McpScope],
    hide: Callable[[str], str] = lambda text: text,
) -> MCPServer:
    """The MCP server. ``kemem()`` gives the AsyncKemem at call time; ``scope_of(ctx)`` the
    caller's scope from the request context (its headers over HTTP); ``hide`` takes what an
    error message must not show (the engine's address)."""
    server: MCPServer = MCPServer("kemem-es", instructions=INSTRUCTIONS)
    calls = Calls(kemem, scope_of, hide)
    _memory_tools(server, calls)
    _recall_tools(server, calls)
    return server


def http_mcp(app: Any) -> MCPServer:
    """The MCP server of a ``kemem-es serve`` app: its AsyncKemem; the scope from the caller's
    key (the app's KeyRing; keyless: any agent)."""
    from kemem_es.server.errors import hide_engine

    def scope_of(ctx: Any) -> McpScope:
        headers = ctx.headers or {}
        access = app.state.keyring.access(headers.get("authorization"))
        return McpScope(app.state.kemem.settings.default_agent_id, access)

    def hide(text: str) -> str:
        return hide_engine(text, app.state.kemem.settings.url)

    return build_mcp(lambda: app.state.kemem, scope_of, hide)


def run_stdio(user: str | None = None, agent: str | None = None) -> None:
    """``kemem-es mcp``: serve on stdin/stdout until the client closes them."""
    import anyio

    from kemem_es.async_kemem import AsyncKemem

    km = AsyncKemem()
    default = agent or km.settings.default_agent_id
    scope = McpScope(default, Access(frozenset({default})), user)
    server = build_mcp(lambda: km, lambda _: scope)

    async def main() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await km.aclose()

    anyio.run(main)
