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


# -- the README ------------------------------------------------------------------------------
README = REPO / "README.md"
SETUP = ("bash scripts/setup.sh", "bash scripts/test.sh")  # run by .ci/run itself


def readme_commands() -> list[str]:
    """Every command of the README's ``bash`` blocks, continuation lines joined, comments and
    a trailing ``&`` kept (``kemem-es serve &`` runs in the background)."""
    text = README.read_text(encoding="utf-8")
    commands = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()  # no ' #' inside the README's commands
            if line and not line.startswith("#"):
                commands.append(line)
    return commands


def test_the_readme_is_short_and_keeps_its_sections() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for heading in ("## Set-up (two commands)", "## A chat loop with memory"):
        assert heading in text  # the set-up commands; the chat loop a test runs as written


def test_the_readmes_links_lead_somewhere() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets
    dead = [
        t
        for t in targets
        if not t.startswith(("http://", "https://", "#"))
        and not (REPO / t.split("#", 1)[0]).exists()
    ]
    assert not dead, f"README links to missing files: {dead}"


def test_the_readmes_commands_are_ones_ci_runs() -> None:
    """Each README command is run by CI: the two set-up commands by .ci/run itself, the rest
    by tests/engine/test_readme_commands.py, which knows kemem-es and curl."""
    commands = readme_commands()
    ci = (REPO / ".ci/run").read_text(encoding="utf-8")
    assert [c for c in commands if c.startswith("bash ")] == list(SETUP)
    assert all(c in ci for c in SETUP)
    other = [c for c in commands if c not in SETUP]
    assert other and all(c.split()[0] in ("kemem-es", "curl") for c in other), other


def test_bench_results_hold_reports_not_scripts() -> None:
    """A report cites the commit and the command that measured it; one-off experiment scripts
    do not live beside it (nothing could keep them running against today's package)."""
    scripts = [
        str(p.relative_to(REPO))
        for p in (REPO / "bench/results").rglob("*")
        if p.suffix in (".py", ".sh") and "round" in str(p.relative_to(REPO / "bench/results"))
    ]
    assert not scripts, scripts
