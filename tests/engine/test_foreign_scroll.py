"""Issue 40, item 5: a scroll from outside the package (a backup or export script's
``helpers.scan``) over a memory index. On OpenSearch 3.5 it could close the index's vector
files, after which whole-document reads and scripted updates failed until a reopen. Whatever
the node does, the package survives it: reinforcement, ``update`` and ``get`` still work, or
fail with a KememError that says what to do (``kemem-es doctor --reopen``), and the reopen
brings every write back."""

from __future__ import annotations

import pytest

from kemem_es.errors import KememError

pytestmark = [
    pytest.mark.engine,
    pytest.mark.es_node_lacks("the scan is opensearch-py's; the bug it probes is OpenSearch 3.5's"),
]

A = {"agent_id": "qiyu", "user_id": "u_scan"}
B = {**A, "user_id": "u_other"}


def _survives(kemem, action) -> bool:
    """True when the action worked; False when it failed with the one-line way out."""
    try:
        action()
    except KememError as e:
        assert "doctor --agent A --reopen" in str(e), str(e)
        return False
    return True


def test_a_foreign_scan_leaves_writes_working_or_names_the_way_out(kemem) -> None:
    scan = pytest.importorskip("opensearchpy.helpers").scan
    kemem.init()
    rows = [
        {**who, "id": f"s{i}", "description": f"木木第{i}次去爬山", "created_at": "2025-01-01"}
        for i in range(60)
        for who in (A, B)
    ]  # enough for a vector file per segment
    kemem.index_records(rows, "events")
    alias = f"{kemem.settings.index_prefix}-user-events"
    client = kemem.engine.client
    client.indices.flush(index=alias)  # on disk, as a store is after a while
    kemem.engine.refresh(alias)
    everything = {"query": {"match_all": {}}}
    assert sum(1 for _ in scan(client, index=alias, query=everything, size=7)) == 120

    hits = kemem.search("爬山", **A, threshold=0, limit=3).memory_events
    steps = [
        lambda: kemem.flush(),  # the reinforcement the search queued: scripted updates
        lambda: kemem.update("s5", {"place": "香山"}, **A, refresh=True),
        lambda: kemem.get("s5", **A),
    ]
    if not all(_survives(kemem, step) for step in steps):
        from typer.testing import CliRunner

        from kemem_es.cli.app import app

        prefix, url = kemem.settings.index_prefix, kemem.settings.url
        env = {"KEMEM_INDEX_PREFIX": prefix, "KEMEM_ES_URL": url}
        run = CliRunner().invoke(app, ["doctor", "--agent", "qiyu", "--reopen"], env=env)
        assert run.exit_code == 0, run.output
        kemem.search("爬山", **A, threshold=0, limit=3)
        kemem.flush()
        kemem.update("s5", {"place": "香山"}, **A, refresh=True)
    assert kemem.get("s5", **A).place == "香山"
    assert all(kemem.get(h.index, **A).recall_count >= 1 for h in hits)
