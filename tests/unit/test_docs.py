"""The docs the code cites are in the repository: every ``docs/SPEC.md §N`` has its section."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CITE = re.compile(r"docs/SPEC\.md(?:'s)? §(\d+)")


def _cited() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    paths = [*REPO.glob("kemem_es/**/*.py"), *REPO.glob("tests/**/*.py"), REPO / "README.md"]
    for path in paths:
        for n in CITE.findall(path.read_text(encoding="utf-8")):
            out.setdefault(n, set()).add(str(path.relative_to(REPO)))
    return out


def test_every_cited_section_of_the_spec_exists() -> None:
    sections = set(re.findall(r"^## (\d+)\. ", (REPO / "docs/SPEC.md").read_text(), re.M))
    cited = _cited()
    assert len(cited) >= 5  # the package does cite it
    missing = {n: sorted(where) for n, where in cited.items() if n not in sections}
    assert not missing, f"cited but not in docs/SPEC.md: {missing}"


def test_the_package_cites_no_spec_outside_the_repository() -> None:
    bare = re.compile(r"(?<!docs/)SPEC(?:\.md)? ?§")
    found = [
        str(p.relative_to(REPO))
        for p in [*REPO.glob("kemem_es/**/*.py"), REPO / "README.md"]
        if bare.search(p.read_text(encoding="utf-8"))
    ]
    assert not found, f"'SPEC §' without docs/: {found}"
