"""The closed sets of names (databases, memory kinds) as plain Literal types, importable
without pydantic: the CLI's options are typed with them before anything heavy loads."""

from __future__ import annotations

from typing import Literal

Database = Literal["user", "official"]
MemoryKind = Literal["events", "entities"]
