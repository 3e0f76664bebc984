"""Engine layer: talks to the cluster and nothing else.

errors.py (client errors → KememError), dialect.py (pure dialect objects), client.py (the one
``Engine`` and its request method), connect.py (connecting), local.py / jdk.py (local nodes).
"""

from kemem_es.engine.client import Engine
from kemem_es.engine.connect import connect  # the function (it shadows the module's name here)

__all__ = ["Engine", "connect"]
