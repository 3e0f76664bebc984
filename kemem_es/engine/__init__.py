"""Engine layer: client factory, dialects, index templates, bulk writes, the local node."""

from kemem_es.engine.client import Engine, connect

__all__ = ["Engine", "connect"]
