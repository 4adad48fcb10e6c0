#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what is missing, checks formatting and
# lints, then runs every test (unit, integration against real redis-server processes, doc).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-tools.sh

cargo fmt --all -- --check
cargo clippy --all-targets --all-features --locked -- -D warnings
cargo test --doc --all-features --locked
# The benchmark smoke test runs the bench example as a program: build it with the same features.
cargo build --examples --all-features --locked
cargo nextest run --all-targets --all-features --locked --profile "${NEXTEST_PROFILE:-default}"
