"""The OpenAI-compatible proxy (docs/proxy.md): ``POST /v1/chat/completions`` and
``POST /v1/responses`` on ``kemem-es serve``. A chat app keeps its OpenAI SDK and points its
base URL here: each request is recalled for (``context()`` of the last user turn, the earlier
turns as the recall's dialogue), the memory text is injected into the system message, the
request goes on to ``KEMEM_PROXY_UPSTREAM_URL`` and its answer comes back unchanged, plus
``memory_info`` (a header on a stream). After the answer the turn is stored in the session
pipeline (``auto_store``).

- Scope: ``memory_context`` ``{user_id, agent_id, session_id}`` in the body (the SDKs'
  ``extra_body``) or the headers ``X-Kemem-User-Id`` / ``X-Kemem-Agent-Id`` /
  ``X-Kemem-Session-Id`` (the SDKs' ``default_headers``); the agent must be one the caller's
  kemem key serves (keyless loopback: any; default ``KEMEM_DEFAULT_AGENT_ID``). The client's
  bearer token is its kemem key, never forwarded; the upstream gets
  ``KEMEM_PROXY_UPSTREAM_KEY``, which no answer, error or log line shows.
- ``memory_config``: ``enable_memory``, ``memory_depth`` (recalled details at most),
  ``relevance_threshold``, ``auto_store``, ``max_tokens`` (the memory budget), ``position``.
- A stream is relayed chunk by chunk as the upstream sends it. Its turn is stored once the
  upstream finished it and the client read it all; a client that disconnects early stores
  nothing (the upstream call is closed then too).
- The memory step degrades: engine down or slow → the request is forwarded without memories
  and ``memory_info.degraded`` says why. The upstream's errors come back with their status
  (the key scrubbed from the body); an unreachable upstream is 502, a slow one 504.
- Durable (the sessions index, ``store/proxy_records.py``): a response id's session, within
  its agent and user, and the usage counts per agent and user.

The modules: ``models`` (request and answer models), ``memory`` (scope, recall, injection,
the turn stored), ``upstream`` (the call, the stream, the answer read), ``durable`` (response
chains and usage counts), ``state`` (per app), ``routes``.
"""

from kemem_es.server.proxy.routes import router
from kemem_es.server.proxy.state import close_proxy

__all__ = ["close_proxy", "router"]
