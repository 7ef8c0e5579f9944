#!/usr/bin/env bash
# The Python SDK's CI step: install the package (pip, no build isolation,
# standard library only), check the generated operations, and run its
# tests against a real heph server ($HEPH_BIN, else one built here).
# Runnable from any working directory.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT="$(pwd)"
PY="${PYTHON:-python3}"
tmp="$(mktemp -d /tmp/heph-sdk-py.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT

"$PY" --version

# Install into a venv that sees the system's setuptools (nothing is
# downloaded); where the venv module is missing, into the system's Python,
# and where pip refuses that (PEP 668), with --break-system-packages.
install() {
	"$PY" -m pip install --no-build-isolation --quiet "$@" ./sdk/python
}
if "$PY" -m venv --system-site-packages "$tmp/venv" 2>"$tmp/venv.err"; then
	PY="$tmp/venv/bin/python"
	echo "pip: installing into a venv in $tmp/venv"
	install
else
	cat "$tmp/venv.err" >&2
	echo "pip: no venv; installing into the system's Python"
	if ! install 2>"$tmp/pip.err"; then
		if grep -qi "externally.managed" "$tmp/pip.err"; then
			install --break-system-packages
			echo "pip: installed with --break-system-packages (PEP 668)"
		else
			cat "$tmp/pip.err" >&2
			exit 1
		fi
	fi
fi
# The installed package imports from elsewhere, typed (PEP 561).
(cd "$tmp" && "$PY" -c '
import os, hephaestus
from hephaestus import Client, Worker
assert os.path.exists(os.path.join(os.path.dirname(hephaestus.__file__), "py.typed")), "py.typed is not installed"
print("installed hephaestus", hephaestus.__version__, "at", os.path.dirname(hephaestus.__file__))
')

"$PY" sdk/python/scripts/gen_operations.py --check

if [[ -z "${HEPH_BIN:-}" ]]; then
	echo "building heph into $tmp (set HEPH_BIN to use another)"
	go build -o "$tmp/heph" ./cmd/heph
	export HEPH_BIN="$tmp/heph"
fi

"$PY" -m unittest discover -s sdk/python/tests -v
