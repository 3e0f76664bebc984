"""The engine clients keep enough connections for requests made at once (no engine needed:
building a client connects to nothing)."""

from __future__ import annotations

from kemem_es.config import get_settings
from kemem_es.engine.connect import _elasticsearch_client, _opensearch_client


def test_the_sync_clients_keep_es_pool_size_connections() -> None:
    """urllib3's default is one: a second request at once opened a connection and threw it
    away after (92–102 of 160 queries from 8 threads, measured), a TLS handshake each on a
    remote cluster."""
    settings = get_settings(es_pool_size=7)
    opensearch = _opensearch_client(settings).transport.get_connection()
    assert opensearch.pool.pool.maxsize == 7
    es = next(iter(_elasticsearch_client(settings).transport.node_pool.all()))
    assert es.config.connections_per_node == 7 and es.pool.pool.maxsize == 7
    assert get_settings().es_pool_size == 16
