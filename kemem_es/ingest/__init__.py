"""Reading input files: JSONL decoded and validated line by line (writing is the store's)."""

from kemem_es.ingest.reader import read_jsonl

__all__ = ["read_jsonl"]
