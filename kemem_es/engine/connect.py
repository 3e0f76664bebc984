"""Connecting: the official client of the cluster's dialect, and how it sends a request.

``connect`` asks the cluster's root endpoint (without either client's product check) which
engine and version it is, builds that engine's official client (sync, or async behind the
runtime bridge) and hands the one ``Engine`` a ``Send`` function for it: the only code that
knows how the two client libraries differ.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
from typing import TYPE_CHECKING, Any

from kemem_es.config import Settings, get_settings
from kemem_es.engine.client import Engine, Request, Send
from kemem_es.engine.dialect import detect_dialect, dialect_for
from kemem_es.errors import EngineUnavailable

if TYPE_CHECKING:
    from kemem_es.runtime import Bridge

ELASTICSEARCH_MISSING = (
    "this cluster is Elasticsearch, whose client is an extra: pip install 'kemem-es[elasticsearch]'"
)


def _auth_kwargs(settings: Settings) -> dict[str, Any]:
    kw: dict[str, Any] = {"request_timeout": settings.es_timeout_s}
    if settings.es_api_key:
        kw["api_key"] = settings.es_api_key
    elif settings.es_username:
        kw["basic_auth"] = (settings.es_username, settings.es_password or "")
    if settings.es_ca_certs:
        kw["ca_certs"] = str(settings.es_ca_certs)
    if settings.url.startswith("https"):
        kw["verify_certs"] = settings.es_verify_certs
    return kw


def _opensearch_client(settings: Settings, asynchronous: bool = False) -> Any:
    import opensearchpy

    # opensearch-py defines AsyncOpenSearch only where aiohttp (the async extra) is installed
    client = opensearchpy.AsyncOpenSearch if asynchronous else opensearchpy.OpenSearch

    kw = _auth_kwargs(settings)
    kw["timeout"] = kw.pop("request_timeout")
    if "basic_auth" in kw:
        kw["http_auth"] = kw.pop("basic_auth")
    if "api_key" in kw:
        kw.setdefault("headers", {})["Authorization"] = f"ApiKey {kw.pop('api_key')}"
    # One retry on a dropped connection; a timeout is not retried (it would double the wait).
    kw["max_retries"] = settings.es_max_retries
    kw["retry_on_timeout"] = False
    # urllib3 keeps one connection by default: any second request at once (another thread,
    # the reinforcement flusher) opened a new connection and threw it away after, a TCP (and
    # TLS) handshake each time. aiohttp's connector takes the same bound as ``maxsize``.
    kw["pool_maxsize" if not asynchronous else "maxsize"] = settings.es_pool_size
    from kemem_es.engine.serialize import serializer

    return client(hosts=[settings.url], serializer=serializer(), **kw)


def _elasticsearch_client(settings: Settings, asynchronous: bool = False) -> Any:
    try:
        from elasticsearch import AsyncElasticsearch, Elasticsearch
    except ImportError:
        raise EngineUnavailable(ELASTICSEARCH_MISSING) from None

    client = AsyncElasticsearch if asynchronous else Elasticsearch  # async: needs aiohttp
    return client(
        settings.url,
        max_retries=settings.es_max_retries,
        retry_on_timeout=False,
        connections_per_node=settings.es_pool_size,
        **_auth_kwargs(settings),
    )


# Where the version is read when GET / is refused (the Elasticsearch node from Maven Central
# answers it with 405; a restricted API key may get 403): the local node's info.
NODES_INFO = "/_nodes/_local?filter_path=cluster_name,nodes.*.version,nodes.*.build_flavor"


def _root_info(settings: Settings) -> dict[str, Any]:
    """GET / without either client's product check, to learn the dialect and version; when the
    cluster refuses it (405, 404, 403), the local node's info says the same (a 200 there, not
    the root endpoint alone, is what "reachable" means)."""
    try:
        return _get_json(settings, "/")
    except urllib.error.HTTPError as exc:
        if exc.code not in (403, 404, 405):
            raise _http_unavailable(settings, exc) from None
    try:
        nodes = _get_json(settings, NODES_INFO)
    except urllib.error.HTTPError as exc:
        raise _http_unavailable(settings, exc) from None
    return info_from_nodes(nodes)


def info_from_nodes(nodes: dict[str, Any]) -> dict[str, Any]:
    """The root endpoint's answer rebuilt from ``GET /_nodes/_local``: Elasticsearch reports a
    build flavour (and its product header, kept by ``_get_json`` as ``_product``); OpenSearch
    neither."""
    node: dict[str, Any] = next(iter((nodes.get("nodes") or {}).values()), {})
    elastic = nodes.get("_product") == "Elasticsearch" or "build_flavor" in node
    version: dict[str, Any] = {"number": str(node.get("version", "?"))}
    if not elastic:
        version["distribution"] = "opensearch"
    return {"cluster_name": nodes.get("cluster_name"), "version": version, "via": "_nodes"}


def _http_unavailable(settings: Settings, exc: urllib.error.HTTPError) -> EngineUnavailable:
    return EngineUnavailable(
        f"search engine at {_redact(settings.url)} answered HTTP {exc.code}: {exc.reason}"
    )


def _get_json(settings: Settings, path: str) -> dict[str, Any]:
    """GET ``path`` of the cluster with the configured credentials; HTTP errors propagate,
    an unreachable cluster is EngineUnavailable."""
    import http.client
    import ssl
    import urllib.request

    req = urllib.request.Request(settings.url.rstrip("/") + path)
    if settings.es_api_key:
        req.add_header("Authorization", f"ApiKey {settings.es_api_key}")
    elif settings.es_username:
        import base64

        token = f"{settings.es_username}:{settings.es_password or ''}".encode()
        req.add_header("Authorization", "Basic " + base64.b64encode(token).decode())
    ctx = None
    if settings.url.startswith("https"):
        ctx = ssl.create_default_context(
            cafile=str(settings.es_ca_certs) if settings.es_ca_certs else None
        )
        if not settings.es_verify_certs:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    where = _redact(settings.url)
    try:
        with urllib.request.urlopen(req, timeout=min(settings.es_timeout_s, 10), context=ctx) as r:
            body = json.loads(r.read().decode())
            product = r.headers.get("X-elastic-product")
            if isinstance(body, dict) and product:
                body["_product"] = product
            return body
    except urllib.error.HTTPError:
        raise
    except http.client.HTTPException:
        # something listens there but does not speak HTTP (a node's transport port: a stale
        # KEMEM_ENGINE_PORT or KEMEM_ES_URL)
        raise EngineUnavailable(
            f"the search engine at {where} did not answer in HTTP: is that the node's HTTP "
            "port? (check KEMEM_ES_URL / KEMEM_ENGINE_PORT)"
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        hint = (
            "start the local engine with `kemem-es engine start`"
            if not settings.es_url
            else "check KEMEM_ES_URL and the network"
        )
        raise EngineUnavailable(
            f"cannot reach the search engine at {where} ({reason}); {hint}"
        ) from None


def _redact(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password:
        netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url


def opensearch_send(client: Any) -> Send:
    """opensearch-py sends through its transport: bulk lines as ndjson text, the time limit
    as ``timeout`` (None: the client's)."""
    transport = client.transport

    def send(req: Request) -> Any:
        body = req.body
        if req.ndjson:
            dumps = transport.serializer.dumps
            body = "".join(dumps(line) + "\n" for line in body)
        return transport.perform_request(
            req.method, req.path, params=req.params or None, body=body, timeout=req.timeout
        )

    return send


_JSON = {"accept": "application/json", "content-type": "application/json"}
_NDJSON = {"accept": "application/json", "content-type": "application/x-ndjson"}


def elasticsearch_send(client: Any) -> Send:
    """elasticsearch-py sends through ``perform_request`` (its product check and compatibility
    headers included), the time limit set with ``options``."""

    def send(req: Request) -> Any:
        sender = client if req.timeout is None else client.options(request_timeout=req.timeout)
        headers = _NDJSON if req.ndjson else _JSON if req.body is not None else None
        resp = sender.perform_request(
            req.method, req.path, params=req.params or None, headers=headers, body=req.body
        )
        return bool(resp) if req.method == "HEAD" else resp.body

    return send


def connect(settings: Settings | None = None, bridge: Bridge | None = None) -> Engine:
    """Connect to the configured cluster (the local node when KEMEM_ES_URL is unset).

    With a ``bridge`` the engine runs on the official *async* client (see runtime.py): the
    same Engine, the same request code, each call awaited on the bridge's loop."""
    from kemem_es.runtime import AwaitingClient, offload

    settings = settings or get_settings()
    info = offload(_root_info, settings)
    name = settings.dialect if settings.dialect != "auto" else detect_dialect(info)
    if name == "opensearch":
        make, sender = _opensearch_client, opensearch_send
    else:
        # The 8.x client sends compatible-with=8, which 9.x still serves (REST compatibility).
        major = str(info.get("version", {}).get("number", "8")).split(".")[0]
        if major not in ("8", "9"):
            raise EngineUnavailable(
                f"Elasticsearch {info.get('version', {}).get('number')} is not supported; use "
                "8.x or 9.x"
            )
        make, sender = _elasticsearch_client, elasticsearch_send
    client = make(settings) if bridge is None else AwaitingClient(make(settings, True), bridge)
    engine = Engine(client, settings, info, dialect_for(name, info), sender(client))
    engine.resolve_scoring()  # KEMEM_SCORING=auto: one question to an Elasticsearch cluster
    return engine
