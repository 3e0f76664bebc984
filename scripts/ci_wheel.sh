#!/usr/bin/env bash
# CI: the package as a user gets it. Build an sdist and a wheel from the checkout (the wheel from
# the sdist, so the sdist is complete), install the wheel into a fresh virtual environment
# outside the checkout, and from there: `kemem-es --version`, `kemem-es demo` into a prefix of
# its own on the running engine, one query (the CLI, then tests/typing/user_script.py as a
# program), and `mypy --strict` on that script against the installed package (its own types,
# through py.typed); mypy must also refuse tests/typing/wrong_use.py. The prefix's indices are
# deleted afterwards.
#
# Needs the engine the tests use (the local node on KEMEM_ENGINE_PORT, or KEMEM_ES_URL) and the
# embedding model (KEMEM_MODEL_DIR, else ../shared/models/m3e-small-onnx).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
source scripts/python_env.sh  # .venv when setup.sh made one: the Python that builds
if [[ -z "${KEMEM_MODEL_DIR:-}" && -d ../shared/models/m3e-small-onnx ]]; then
  export KEMEM_MODEL_DIR="$PWD/../shared/models/m3e-small-onnx"
fi
export KEMEM_ES_URL="${KEMEM_ES_URL:-http://127.0.0.1:${KEMEM_ENGINE_PORT:-9251}}"
export KEMEM_INDEX_PREFIX="ci-wheel-$$"
work="$(mktemp -d)"

cleanup() {
  if [[ -x "$work/venv/bin/python" ]]; then
    "$work/venv/bin/python" - <<'EOF' || true
import json, os, urllib.request
from kemem_es.config import get_settings
s = get_settings()
# the prefix's own indices only: names listed first, each deleted by name
req = urllib.request.Request(f"{s.url}/_cat/indices/{s.index_prefix}-*?format=json")
for row in json.load(urllib.request.urlopen(req, timeout=30)):
    urllib.request.urlopen(
        urllib.request.Request(f"{s.url}/{row['index']}", method="DELETE"), timeout=30
    )
EOF
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo "== build (sdist, then the wheel from it)"
python3 -c "import build" 2>/dev/null || python3 -m pip install -q "build>=1"
python3 -m build --outdir "$work/dist" . >"$work/build.log" 2>&1 || {
  cat "$work/build.log"
  exit 1
}
wheel="$(ls "$work"/dist/*.whl)"
ls -l "$work/dist"
python3 - "$wheel" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert "kemem_es/py.typed" in names, "the wheel has no py.typed: users' type checkers see Any"
assert not any(n.startswith(("tests/", "bench/")) for n in names), "tests or bench in the wheel"
print(f"wheel: {len(names)} files, py.typed included")
EOF

echo "== install into a fresh virtual environment"
python3 -m venv "$work/venv"
venv="$work/venv/bin"
"$venv/python" -m pip install -q --upgrade pip
"$venv/python" -m pip install -q "$wheel" "mypy>=1.11"
cd "$work"  # away from the checkout: nothing of it is importable from here
"$venv/python" - "$repo" <<'EOF'
import sys, kemem_es
where = kemem_es.__file__
assert where.startswith(sys.prefix) and not where.startswith(sys.argv[1]), where
print("kemem_es from", where)
EOF

echo "== the installed kemem-es"
"$venv/kemem-es" --version
"$venv/kemem-es" demo
"$venv/kemem-es" query "我那只狗最近好像胖了" --user u_xiaoman --agent lishen

echo "== a user's script: run, then mypy --strict against the installed package"
cp "$repo/tests/typing/user_script.py" "$repo/tests/typing/wrong_use.py" "$work/"
"$venv/python" user_script.py
"$venv/mypy" --strict --no-incremental user_script.py
if out="$("$venv/mypy" --strict --no-incremental wrong_use.py)"; then
  echo "mypy accepted wrong_use.py: the package's types are not seen" >&2
  exit 1
fi
grep -q "\[arg-type\]" <<<"$out" || {
  echo "$out" >&2
  exit 1
}
echo "mypy refuses wrong_use.py: $(grep -c 'error:' <<<"$out") error(s), arg-type"
echo "ci_wheel: ok"
