#!/usr/bin/env bash
# The demo: three simulated clusters, the operator in each (as the member
# chart's ServiceAccount), one replica set across them. Installs what it needs
# first (helm-python-sdk to render the chart, with hack/test-tools.sh).
# Extra arguments go to `lab demo` (e.g. --exit-when-ready). Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(hack/test-tools.sh)"
cargo build --bins -p mongodb-member-operator -p lab
exec "${CARGO_TARGET_DIR:-target}/debug/lab" demo "$@"
