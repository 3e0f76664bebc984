"""Closing and reopening the memory indices: the way out of OpenSearch 3.5's closed vector
files (a scroll over an index that derives its vectors closes them under the reader; from then
on every read of a whole document and every scripted update fails with
``already_closed_exception`` until the index is reopened: k-NN issues 3191, 3458; the README).
kemem-es never scrolls; a backup or export script may. ``kemem-es doctor --reopen``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kemem_es.engine.errors import activity
from kemem_es.store.layout import DATABASES, KINDS, index_alias

if TYPE_CHECKING:
    from kemem_es.engine.client import Engine


def reopen(engine: Engine) -> list[str]:
    """Close and reopen every memory index of the prefix (each unavailable for the moment
    it takes, a second or so); the concrete indices reopened."""
    prefix = engine.settings.index_prefix
    done: list[str] = []
    for db in DATABASES:
        for kind in KINDS:
            alias = index_alias(prefix, db, kind)
            if not engine.index_exists(alias):
                continue
            with activity(f"reopening {alias}"):
                for index in engine.get_index(alias):
                    engine.request("POST", f"/{index}/_close")
                    engine.request("POST", f"/{index}/_open", params={"wait_for_active_shards": 1})
                    done.append(index)
    return done
