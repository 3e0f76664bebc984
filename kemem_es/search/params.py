"""Moved: the query parameters are part of the contract (``kemem_es.contract.params``) and the
latin-script profile is ``kemem_es.search.profile``. Their names stay importable from here for
code written against earlier versions."""

from typing import Any

from kemem_es.contract import params as _moved
from kemem_es.search import profile as _profile


def __getattr__(name: str) -> Any:
    return getattr(_moved if hasattr(_moved, name) else _profile, name)
