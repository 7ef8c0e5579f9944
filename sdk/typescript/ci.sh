#!/usr/bin/env bash
# CI of the TypeScript SDK: install, check the generated types are current,
# run the tests against a real heph server, and install the package into an
# empty project.
set -euo pipefail
cd "$(dirname "$0")"
SDK="$(pwd)"
ROOT="$(cd ../.. && pwd)"
npm ci
npm run check-types
# The declarations type-check, strict, against the uses in test/types-check.ts.
npm run typecheck
if [[ -z "${HEPH_BIN:-}" ]]; then
	bindir="$(mktemp -d)"
	(cd "$ROOT" && go build -o "$bindir/heph" ./cmd/heph)
	export HEPH_BIN="$bindir/heph"
fi
npm test
proj="$(mktemp -d)"
(cd "$proj" && npm init -y >/dev/null && npm install "$SDK" && node -e "import('@hephaestus-go/sdk').then(m => { if (typeof m.Client !== 'function' || typeof m.Worker !== 'function') process.exit(1) })")
echo "TypeScript SDK: ok"
