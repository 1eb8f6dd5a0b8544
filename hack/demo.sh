#!/usr/bin/env bash
# The demo: three simulated clusters, the operator in each, one replica set across them.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --bins -p mongodb-member-operator -p lab
exec target/debug/lab demo "$@"
