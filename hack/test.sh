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
  if [ $# -gt 0 ]; then
    echo "== tests (cargo nextest)" >&2
    cargo nextest run --workspace --locked "$@"
  else
    # The hundred-instance scenario keeps both cores busy for minutes: beside
    # other labs it took from 530 s to 915 s, alone it has the machine.
    scale='package(lab) & binary(scenarios) & test(/^scale::/)'
    echo "== tests (cargo nextest), the lab scenarios three at a time" >&2
    cargo nextest run --workspace --locked -E "not ($scale)"
    echo "== the hundred-instance lab scenario, alone" >&2
    cargo nextest run --workspace --locked -E "$scale"
  fi
  echo "== doc tests" >&2
  cargo test --workspace --locked --doc
else
  echo "== tests" >&2
  cargo test --workspace --locked "$@"
fi
