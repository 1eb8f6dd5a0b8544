#!/usr/bin/env bash
# The project's test command: the gates (format, clippy, docs), then every test
# of the workspace, with the third-party clients the fidelity tests use
# installed first. Tests run with cargo-nextest when it is installed (each in a
# process of its own; the lab's end-to-end scenarios side by side, as many at
# once as `.config/nextest.toml` allows), otherwise with `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(hack/test-tools.sh)"
export HOME="${HOME:-/tmp}"

echo "== gate: cargo fmt --check" >&2
cargo fmt --all --check
echo "== gate: cargo clippy -D warnings" >&2
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== gate: cargo doc, warnings denied" >&2
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet
if cargo nextest --version >/dev/null 2>&1; then
  echo "== tests (cargo nextest)" >&2
  cargo nextest run --workspace --locked "$@"
  echo "== doc tests" >&2
  cargo test --workspace --locked --doc
else
  echo "== tests" >&2
  cargo test --workspace --locked "$@"
fi
