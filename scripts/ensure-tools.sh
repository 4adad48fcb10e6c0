#!/usr/bin/env bash
# Installs what a fresh machine lacks for leasehold's demo and tests: redis-server (Debian's
# package) and cargo-nextest. Safe to run again: it only installs what is missing.
set -euo pipefail

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing redis-server (Debian package)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "installing cargo-nextest" >&2
  cargo install --locked cargo-nextest >/dev/null
fi
