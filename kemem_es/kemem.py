"""The Python entry point: one object that sets up, indexes, recalls and manages memories.
Each verb is a short delegation: the store writes and reads, the searcher recalls, the memory
service runs the Memory API."""

from __future__ import annotations

from kemem_es.errors import guarded
from kemem_es.front.indexing import DEMO_FILES, Indexing, demo_path
from kemem_es.front.lifecycle import Lifecycle
from kemem_es.front.memory_verbs import MemoryVerbs
from kemem_es.front.recall import with_session

__all__ = ["DEMO_FILES", "GUARDED_VERBS", "Kemem", "demo_path", "with_session"]


class Kemem(MemoryVerbs, Lifecycle, Indexing):
    """Connects lazily: building one is cheap; the engine, model and jieba load on first use.

    >>> km = Kemem(model_dir="/path/to/onnx-model")   # or KEMEM_* env vars
    >>> km.init(); km.index_file(Path("events.jsonl"), kind="events", db="user")
    """


# Every failure of a public verb is a KememError (errors.guarded): the net under the specific
# checks, for what they did not foresee. A new public verb is added here.
GUARDED_VERBS = (
    "readiness", "warm_up", "query", "flush", "cleanup", "query_simple", "prompt", "init",
    "index_file", "index_records", "index_demo", "drain", "search", "add", "get", "get_all",
    "update", "delete", "delete_all", "count", "history", "stats", "repair_history",
    "context", "end_session", "session_messages", "session_message", "list_sessions",
    "delete_session", "resume_sessions",
)  # fmt: skip
for _verb in GUARDED_VERBS:
    setattr(Kemem, _verb, guarded(getattr(Kemem, _verb)))
