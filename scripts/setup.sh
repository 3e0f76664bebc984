#!/usr/bin/env bash
# One command on a fresh machine: install kemem-es, fetch + start the local engine,
# index the bundled demo corpus and run one query against it.
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/python_env.sh
install_package "dev,bench"

# The research-only test model lives beside the repo on the project's machines; users point
# KEMEM_MODEL_DIR (a local ONNX directory) or KEMEM_MODEL (a hub id) at their own model.
if [[ -z "${KEMEM_MODEL_DIR:-}" && -z "${KEMEM_MODEL:-}" && -d ../shared/models/m3e-small-onnx ]]; then
  export KEMEM_MODEL_DIR="$PWD/../shared/models/m3e-small-onnx"
fi

if [[ -z "${KEMEM_ES_URL:-}" ]]; then
  # The local engine needs Maven (it fetches the jars from Maven Central) and a JDK: 21+ for
  # OpenSearch 3.5, else 17 for 2.19. Install what is missing where we may (root + apt).
  need=()
  command -v mvn >/dev/null || need+=(maven)
  if ! command -v java >/dev/null && ! compgen -G "/usr/lib/jvm/*/bin/java" >/dev/null; then
    need+=(openjdk-17-jdk-headless)
  fi
  if ((${#need[@]})); then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
    else
      echo "the local engine needs: ${need[*]} (install them, or set KEMEM_ES_URL)" >&2
      exit 1
    fi
  fi
  kemem-es engine start
fi
# Indices written by an older kemem-es (global ids) move to the per-scope layout; no-op otherwise.
kemem-es migrate
kemem-es demo
kemem-es engine status
if kemem-es --help | grep -q " query "; then
  kemem-es query "室友失恋了，我们陪她吃了一晚上火锅" --user u_mumu --agent qiyu --limit 5
fi
