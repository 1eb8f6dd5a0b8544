#!/usr/bin/env bash
# The demo: three simulated clusters, the operator in each, one replica set across them.
# Extra arguments go to `lab demo` (e.g. --exit-when-ready).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --bins -p mongodb-member-operator -p lab
exec "${CARGO_TARGET_DIR:-target}/debug/lab" demo "$@"
