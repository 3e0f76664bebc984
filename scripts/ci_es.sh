#!/usr/bin/env bash
# CI, Elasticsearch: a real Elasticsearch node from Maven Central (the server jar +
# transport-netty4, downloaded now, never shipped), the engine test suite on it in native
# scoring, and its demo answers against OpenSearch's. Run by .ci/run: the suite beside the
# OpenSearch suite, the check after it while that node (KEMEM_ENGINE_PORT, default 9251) still runs.
#
# - The suite: every test marked `engine`, except those marked `es_node_lacks` (they need what
#   this node does not have: Painless, analysis-common, mapper-extras, reindex; each says why,
#   and docs/engines.md lists them) and the OpenSearch-only node tests (local cluster, versions).
#   Skips are reported (-rs).
# - scripts/engine_check.py: Elasticsearch 9.5 (a JDK 21+) against the OpenSearch node: the
#   same memories, in the same order, unrounded scores within 1e-5.
# Parts: `suite` (the node and its engine suite: .ci/run runs it beside the README suite, with
# which it shares no node, port or index prefix), `check` (the 9.5 comparison, which needs the
# OpenSearch node), none: both, in that order.
# Environment: KEMEM_ES_NODE_PORT (default 9287; its transport port is +100), KEMEM_ES_NODE_VERSION
# (8.18: the suite's node, on Java 17+), KEMEM_HOME (the node's home is $KEMEM_HOME-es).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/python_env.sh
base="${KEMEM_HOME:-$HOME/.kemem}"
home="$base-es"
port="${KEMEM_ES_NODE_PORT:-9287}"
version="${KEMEM_ES_NODE_VERSION:-8.18}"
os_port="${KEMEM_ENGINE_PORT:-9251}"
if [[ -z "${KEMEM_TEST_MODEL_DIR:-}" && -d ../shared/models/m3e-small-onnx ]]; then
  export KEMEM_TEST_MODEL_DIR="$PWD/../shared/models/m3e-small-onnx"
fi
part="${1:-all}"
case "$part" in all | suite | check) ;; *) echo "usage: ci_es.sh [suite|check]" >&2; exit 2 ;; esac
stop_es() { kemem-es engine stop --home "$home" --port "$port" || true; }
trap stop_es EXIT

t0=$SECONDS
if [[ "$part" != check ]]; then
  KEMEM_ENGINE=elasticsearch kemem-es engine start --home "$home" --port "$port" \
    --engine-version "$version"
  kemem-es engine status --home "$home" --port "$port" | sed -n '1,12p'
  echo "Elasticsearch $version node started in $((SECONDS - t0)) s"

  KEMEM_TEST_ES_URL="http://127.0.0.1:$port" KEMEM_SCORING=native \
    python3 -m pytest -q -p no:cacheprovider -m "engine and not es_node_lacks" -rs --durations=10 \
    --ignore tests/engine/test_local_cluster.py --ignore tests/engine/test_engine_versions.py
  echo "engine suite on Elasticsearch $version: $((SECONDS - t0)) s"
  stop_es
fi

if [[ "$part" != suite ]]; then
  python3 scripts/engine_check.py --engine elasticsearch --engine-version 9.5 \
    --home "$base-check-es" --port "$((port + 1))" --compare-port "$os_port"
fi
echo "Elasticsearch CI ($part) done in $((SECONDS - t0)) s"
