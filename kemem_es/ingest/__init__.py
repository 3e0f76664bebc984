"""Write path: validate records, turn them into engine documents, bulk-index them."""

from kemem_es.ingest.indexer import Indexer, IndexReport
from kemem_es.ingest.reader import read_jsonl

__all__ = ["IndexReport", "Indexer", "read_jsonl"]
