"""Which agents a caller may touch, stated once for every way in: the HTTP routes (the key's
agents, ``auth.py``), the proxy, the dashboard, and the MCP server (over HTTP the key's agents;
over stdio the configured agent). Free of FastAPI, so ``kemem-es mcp`` needs only the SDK."""

from __future__ import annotations

from dataclasses import dataclass

from kemem_es.errors import Forbidden


@dataclass(frozen=True)
class Access:
    """What the caller may touch: ``agents`` None means every agent (no keys, or ``"*"``)."""

    agents: frozenset[str] | None

    def check(self, agent_id: str) -> None:
        """Forbidden (403 over HTTP, a tool error over MCP) for an agent not allowed."""
        if self.agents is not None and agent_id not in self.agents:
            raise Forbidden(f"agent_id: this API key (or server) may not serve {agent_id!r}")

    def agent(self, agent_id: str | None, default: str) -> str:
        """The call's agent (``default`` when omitted), checked."""
        agent = agent_id if agent_id is not None else default
        self.check(agent)
        return agent


OPEN = Access(None)
