"""What mypy must refuse against the installed package: a query that is not text. If the
package were untyped (no ``py.typed``, everything ``Any``), this would pass unnoticed;
``scripts/ci_wheel.sh`` expects exactly this ``arg-type`` error."""

from __future__ import annotations

from kemem_es import Kemem


def wrong(memory: Kemem) -> None:
    memory.search(42, user_id="u_xiaoman")
