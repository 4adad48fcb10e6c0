#!/usr/bin/env bash
# leasehold's benchmarks, from a fresh machine: installs redis-server and redis-tools (for
# redis-benchmark) when they are missing, builds the release binary and the harness
# (examples/bench/), then runs the harness, which starts its own redis-servers on free loopback
# ports and rewrites docs/BENCHMARKS.md and docs/bench/latency.svg. About 10 minutes, the cold
# release build included. Arguments go to the harness (`--quick` for a tiny run that only
# checks the harness; `--help` for the rest).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Only the Redis packages: the rest of scripts/ensure-tools.sh (cargo-nextest, helm, linters)
# is for the tests and would cost minutes here.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-benchmark >/dev/null 2>&1; then
  echo "installing redis-server and redis-tools (Debian packages)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi

# 500 in-process contenders hold about a thousand connections; the HTTP flood holds 10,000 (the
# harness raises its own soft limit to the hard one for it, and floods fewer when that is too low).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" -lt 4096 ]; then
  echo "warning: only $(ulimit -n) open files allowed; the 500-contender load benchmark needs about 1100" >&2
fi

SECONDS=0
echo "building the release binary and the harness" >&2
cargo build --release --locked --bin leasehold --example bench
build_seconds=$SECONDS

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (the report notes it; a quiet machine gives steadier figures)" >&2
target/release/examples/bench --leasehold-bin target/release/leasehold \
  --build-seconds "$build_seconds" "$@"
echo "benchmarks done in $((SECONDS / 60)) min $((SECONDS % 60)) s (build ${build_seconds} s)" >&2
