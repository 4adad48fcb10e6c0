#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what is missing, checks formatting and
# lints, then runs every test (unit, integration against real redis-server processes, doc).
set -euo pipefail
cd "$(dirname "$0")/.."

# Background steps end with the script, whichever way it ends.
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
logs=$(mktemp -d)

# What a fresh machine lacks (the servers, the container tools, the chart's linters) installs
# beside the first steps, which need only cargo: the downloads wait on the network, the builds
# on the CPU. The tests wait for it.
scripts/ensure-tools.sh >"$logs/tools" 2>&1 &
tools=$!
pids+=("$tools")

cargo fmt --all -- --check
# One build that lints too: clippy's driver compiles the workspace's crates, with every lint
# an error (what `cargo clippy -- -D warnings` checks), and rustc the dependencies, once,
# instead of a check of everything for clippy and then a build. Every cargo below and in the
# tests sees the same two variables, so it finds this build up to date.
export RUSTC_WORKSPACE_WRAPPER=clippy-driver CLIPPY_ARGS=-Dwarnings
# Everything the tests run, with the features nextest resolves (so that it builds nothing
# more): the test programs, the bench example its smoke test runs as a program, the test kit's
# static-binary. --workspace: the test kit (crates/testbed) has tests of its own.
cargo build --workspace --all-targets --all-features --locked

# What ships (tests/ship): the image tests build the static release binary as the Dockerfile
# does, minutes from cold. That build starts now, at the lowest priority, beside the steps
# below and the tests, which mostly wait on timers and real processes; the image tests, last,
# find it built.
nice -n 19 "${CARGO_TARGET_DIR:-target}/debug/static-binary" >"$logs/static" 2>&1 &
static=$!
pids+=("$static")

cargo test --workspace --doc --all-features --locked
# Every link in the docs of the published crates and the test kits resolves.
RUSTDOCFLAGS="-D warnings" cargo doc -p leasehold -p leasehold-core -p testbed -p harness \
  --no-deps --all-features --locked
if ! wait "$tools"; then
  cat "$logs/tools" >&2
  exit 1
fi
cat "$logs/tools" >&2
cargo nextest run --workspace --all-targets --all-features --locked \
  --profile "${NEXTEST_PROFILE:-default}" -E 'not binary(ship)'
# A failed build is the image tests' to report: they run it again and show its errors.
wait "$static" || true
cat "$logs/static" >&2
# The same packages and features as every build above, so that cargo finds them all built: the
# root package alone unifies its dependencies' features differently (stateright, the model's,
# turns on serde's `rc`) and would build serde and all that depends on it again.
cargo nextest run --workspace --all-targets --all-features --locked \
  --profile "${NEXTEST_PROFILE:-default}" -E 'binary(ship)'
