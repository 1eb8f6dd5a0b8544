#!/usr/bin/env bash
# The project's test command: installs the third-party clients the fidelity
# tests use, then runs every test of the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(hack/test-tools.sh)"
export HOME="${HOME:-/tmp}"
cargo test --workspace --locked "$@"
