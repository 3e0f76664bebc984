#!/usr/bin/env bash
# CI: the documentation site builds with every link alive (mkdocs build --strict: a dead link
# between pages, a missing anchor or a link to a repository file that is not there fails), and
# every setting has a description for the generated configuration reference.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh  # .venv when setup.sh made one
python3 -c "import material, mkdocstrings_handlers.python" 2>/dev/null ||
  python3 -m pip install -q "mkdocs-material>=9.5" "mkdocstrings[python]>=0.26"
python3 scripts/settings_doc.py --check
NO_MKDOCS_2_WARNING=1 python3 -m mkdocs build --strict --site-dir "${KEMEM_SITE_DIR:-site}"
