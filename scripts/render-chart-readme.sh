#!/usr/bin/env bash
# Regenerates the Parameters section of charts/leasehold/README.md from the `## @section` and
# `## @param` lines of charts/leasehold/values.yaml (and its install command's image tag from
# Chart.yaml's appVersion), with bitnami's readme-generator-for-helm
# (scripts/ensure-tools.sh installs it in .tools/readme-generator; LEASEHOLD_README_GENERATOR
# points elsewhere). It also refuses a key of values.yaml without its `## @param` line.
# tests/chart/readme.rs runs the generator on a copy and fails when the README differs, so run this
# after every change to values.yaml.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${LEASEHOLD_README_GENERATOR:-}" ]; then
  generator="$LEASEHOLD_README_GENERATOR"
elif [ -x .tools/readme-generator/node_modules/.bin/readme-generator ]; then
  generator=.tools/readme-generator/node_modules/.bin/readme-generator
elif command -v readme-generator >/dev/null 2>&1; then
  generator="$(command -v readme-generator)"
else
  echo "readme-generator not found: run scripts/ensure-tools.sh (it puts it in .tools/readme-generator), or set LEASEHOLD_README_GENERATOR" >&2
  exit 1
fi

if ! out="$("$generator" --values charts/leasehold/values.yaml --readme charts/leasehold/README.md 2>&1)"; then
  echo "$out" >&2
  exit 1
fi
# The install command's image tag is the chart's appVersion (tests/chart/manifests.rs checks it).
app_version=$(sed -n -E 's/^appVersion: *"?([^"]+)"?$/\1/p' charts/leasehold/Chart.yaml)
sed -i -E "s/(image\.tag=)[0-9]+\.[0-9]+\.[0-9]+/\1$app_version/g" charts/leasehold/README.md
echo "charts/leasehold/README.md: Parameters regenerated from values.yaml, image.tag=$app_version" >&2
