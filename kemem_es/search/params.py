"""Moved: the query parameters are part of the contract (``kemem_es.contract.params``) and the
latin-script profile is ``kemem_es.search.profile``. These names stay importable from here for
code written against earlier versions."""

from kemem_es.contract.params import EntityWeights, Mode, Path_, QueryParams, Weights
from kemem_es.search.profile import (
    CALIBRATION,
    ENTITY_CALIBRATION,
    mostly_latin,
    script_params,
)

__all__ = [
    "CALIBRATION",
    "ENTITY_CALIBRATION",
    "EntityWeights",
    "Mode",
    "Path_",
    "QueryParams",
    "Weights",
    "mostly_latin",
    "script_params",
]
