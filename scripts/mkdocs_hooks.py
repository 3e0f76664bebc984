"""mkdocs hooks for the documentation site (``mkdocs.yml``: ``hooks``).

- ``<!-- settings-table -->`` in a page becomes the configuration reference, generated from
  :class:`kemem_es.config.Settings` by ``scripts/settings_doc.py`` (so it cannot go stale).
- A link to a repository file outside ``docs/`` (``../kemem_es/prompts/extract_zh.md``) is not
  part of the site: it becomes the file's path in code, after checking that the file exists. A
  link to a file that is not there is a warning, which ``mkdocs build --strict`` fails on, like
  a dead link between pages.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
log = logging.getLogger("mkdocs.hooks.kemem")

LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def _settings_table() -> str:
    sys.path.insert(0, str(REPO / "scripts"))
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import settings_doc

    return settings_doc.markdown()


def _outside_links(markdown: str, page_path: Path, docs_dir: Path, where: str) -> str:
    def one(m: re.Match[str]) -> str:
        text, target = m.group(1), m.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return m.group(0)
        path = target.split("#", 1)[0]
        resolved = (page_path.parent / path).resolve()
        try:
            resolved.relative_to(docs_dir)
            return m.group(0)  # a page or file of the site: mkdocs checks it
        except ValueError:
            pass
        try:
            rel = resolved.relative_to(REPO)
        except ValueError:
            log.warning("%s: link outside the repository: %s", where, target)
            return m.group(0)
        if not resolved.exists():
            log.warning("%s: link to a missing repository file: %s", where, target)
            return m.group(0)
        return text if text.startswith("`") else f"{text} (`{rel.as_posix()}`)"

    # code blocks are left alone
    out, last = [], 0
    for fence in FENCE.finditer(markdown):
        out.append(LINK.sub(one, markdown[last : fence.start()]))
        out.append(fence.group(0))
        last = fence.end()
    out.append(LINK.sub(one, markdown[last:]))
    return "".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if "<!-- settings-table -->" in markdown:
        markdown = markdown.replace("<!-- settings-table -->", _settings_table())
    docs_dir = Path(config["docs_dir"]).resolve()
    page_path = docs_dir / page.file.src_path
    return _outside_links(markdown, page_path, docs_dir, page.file.src_path)
