#!/usr/bin/env bash
# Installs the real third-party clients the fidelity tests drive (pymongo from
# PyPI, mongosh from npm) into target/test-tools/, and prints the environment
# that points the tests at them. Idempotent: a second run reuses what is there.
#
#   eval "$(hack/test-tools.sh)"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools="$root/target/test-tools"
mkdir -p "$tools"

if [ ! -x "$tools/venv/bin/python" ] || ! "$tools/venv/bin/python" -c 'import pymongo, helm_python' 2>/dev/null; then
  python3 -m venv "$tools/venv" >&2
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check 'pymongo>=4.6,<5' 'helm-python-sdk==0.2.2' >&2
fi

if [ ! -x "$tools/node_modules/.bin/mongosh" ]; then
  (cd "$tools" && npm install --silent --no-audit --no-fund --prefix "$tools" 'mongosh@^2' >&2)
fi

echo "export MMO_PYTHON='$tools/venv/bin/python'"
echo "export MMO_MONGOSH='$tools/node_modules/.bin/mongosh'"
echo "export MMO_REQUIRE_TOOLS=1"
