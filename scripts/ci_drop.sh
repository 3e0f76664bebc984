#!/usr/bin/env bash
# CI for the drop-in surfaces (issue 37), run by .ci/run before the test suite: install the
# pinned npm packages of tests/node (the official openai package, openapi-typescript,
# openapi-fetch, typescript), generate the TypeScript client from the committed
# docs/openapi.json and type-check a program that calls search, add and context with it.
# The Node program that calls the proxy (tests/node/proxy_client.mjs) runs inside the suite
# (tests/test_proxy.py), against a real `kemem-es serve` and a loopback upstream stub.
set -euo pipefail
cd "$(dirname "$0")/../tests/node"
if ! command -v npm >/dev/null; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
  else
    echo "the Node checks need node and npm (apt install nodejs npm)" >&2
    exit 1
  fi
fi
npm ci --no-audit --no-fund
npm run -s generate
npm run -s typecheck
echo "ci_drop: typed client from docs/openapi.json type-checks (tsc --noEmit)"
