"""Moved: the response models are part of the contract (``kemem_es.contract.response``).
Their names stay importable from here for code written against earlier versions."""

from typing import Any

from kemem_es.contract import response as _moved


def __getattr__(name: str) -> Any:
    return getattr(_moved, name)
