"""Round 15: would vectors kept in ``_source`` cost nothing if the hits' fields were read as
stored fields instead of out of ``_source``? A probe, not the package's code: it patches the
package in this process only.

    python .../stored_fields_probe.py build --scale 100000 --prefix bench-lat-sf-{n}
    python .../stored_fields_probe.py measure --scale 100000 --prefix bench-lat-sf-{n} --out F

``build`` writes the latency benchmark's store with the vectors in ``_source`` (derived source
off; the vectors as the benchmark writes them, a float32's full decimals, 11 KB each) and the
fields a hit shows (``search.events.SOURCE_FIELDS``) stored; ``measure`` asks it with
``stored_fields`` and ``_source: false`` (each hit's stored fields handed to the package as its
source). The other arguments are ``bench.latency_ab``'s.
"""

from __future__ import annotations

import sys
from typing import Any

from bench import latency_ab
from kemem_es.engine import client as engine_client
from kemem_es.search import events
from kemem_es.store import templates

SCALAR = [f for f in events.SOURCE_FIELDS if f != "keywords"]


def patch_build() -> None:
    body_of = templates.index_body

    def index_body(kind: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        body = body_of(kind, *args, **kwargs)
        if kind == "events":
            props = body["mappings"]["properties"]
            for f in events.SOURCE_FIELDS:
                props[f] = {**props[f], "store": True}
        body["settings"]["index.knn.derived_source.enabled"] = False
        return body

    templates.index_body = index_body  # type: ignore[assignment]


def patch_measure() -> None:
    event_body = events.event_body

    def body(*args: Any, **kwargs: Any) -> dict[str, Any]:
        out = event_body(*args, **kwargs)
        out["_source"] = False
        out["stored_fields"] = [*events.SOURCE_FIELDS, "_id", "_routing"]
        return out

    events.event_body = body  # type: ignore[assignment]
    msearch = engine_client.Engine.msearch

    def as_source(self: Any, searches: Any) -> list[dict[str, Any]]:
        resps = msearch(self, searches)
        for resp in resps:
            for hit in resp.get("hits", {}).get("hits", []):
                fields = hit.get("fields", {})
                if "_source" not in hit and "description" in fields:
                    hit["_source"] = {f: fields[f][0] for f in SCALAR if f in fields}
                    hit["_source"]["keywords"] = fields.get("keywords", [])
        return resps

    engine_client.Engine.msearch = as_source  # type: ignore[method-assign]


if __name__ == "__main__":
    (patch_build if sys.argv[1] == "build" else patch_measure)()
    latency_ab.main()
