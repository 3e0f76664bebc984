# Sourced by the scripts: the Python kemem-es is installed into. The python3 on the PATH when pip
# may install into it; else (a system Python that refuses pip, PEP 668: Debian 12, Ubuntu 24.04)
# a virtual environment in .venv, made by setup.sh and activated here for every later command.
if [[ -x .venv/bin/python3 ]]; then
  # shellcheck disable=SC1091
  source .venv/bin/activate
fi

# pip install -e ".[extras]" into that Python, making .venv first where the system refuses.
install_package() {
  local extras="$1" err
  err="$(mktemp)"
  if python3 -m pip install -q -e ".[$extras]" 2>"$err"; then
    rm -f "$err"
    return 0
  fi
  if ! grep -q "externally-managed-environment" "$err"; then
    cat "$err" >&2
    rm -f "$err"
    return 1
  fi
  rm -f "$err"
  echo "this Python is managed by the system (PEP 668): installing into .venv" >&2
  if ! python3 -m venv .venv 2>/dev/null; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
      python3 -m venv .venv
    else
      echo "python3 -m venv failed: install python3-venv (apt) and run this again" >&2
      return 1
    fi
  fi
  # shellcheck disable=SC1091
  source .venv/bin/activate
  python3 -m pip install -q -e ".[$extras]"
}
