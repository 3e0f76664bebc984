"""The context manager: appends a session's messages, hands batches of turns to extraction in
the background, keeps the running summary, and tells ``context()`` what the dialogue is.

Durability: messages, the session's state and every batch handed over are engine documents
(store/sessions.py, store/batches.py). A batch is recorded before the window moves; a worker
claims it with a lease, saves the extractor's answer, writes the memories through the normal
write path and marks it done. A process killed at any point leaves a batch that the next one
(``resume``) claims once its lease has passed, so no batch is extracted twice or never.
"""

from __future__ import annotations

from kemem_es.session.appending import PROBE, RETRIES, SWEEP_MAX, SWEEP_PAGE, Appending
from kemem_es.session.base import STATES_KEPT, MemoryWriter, Outcome, Swept, View
from kemem_es.session.jobs import RETRY_PAUSE_S, TRIES
from kemem_es.session.viewing import MAX_DIALOGUE

__all__ = [
    "MAX_DIALOGUE",
    "PROBE",
    "RETRIES",
    "RETRY_PAUSE_S",
    "STATES_KEPT",
    "SWEEP_MAX",
    "SWEEP_PAGE",
    "TRIES",
    "MemoryWriter",
    "Outcome",
    "SessionManager",
    "Swept",
    "View",
]


class SessionManager(Appending):
    """A session's messages appended (``appending``), its batches extracted in the background
    (``jobs``), its dialogue and running summary (``viewing``), over the parts, locks and
    known states of ``base``."""
