#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what is missing, checks formatting and
# lints, then runs every test (unit, integration against real redis-server processes, doc).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-tools.sh

cargo fmt --all -- --check
# --workspace: the test kit (crates/testbed) has tests of its own.
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
cargo test --workspace --doc --all-features --locked
# The benchmark smoke test runs the bench example as a program: build it with the same features.
cargo build --examples --all-features --locked
# What ships (tests/ship): the image tests build the static release binary as the Dockerfile
# does (minutes from cold) and the package tests the library without default features: alone
# and first, so that those builds do not load the machine under the timing tests; then
# everything else.
cargo nextest run --all-features --locked --profile "${NEXTEST_PROFILE:-default}" --test ship
cargo nextest run --workspace --all-targets --all-features --locked \
  --profile "${NEXTEST_PROFILE:-default}" -E 'not binary(ship)'

