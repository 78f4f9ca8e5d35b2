#!/usr/bin/env bash
# Fetches upstream OLM v1's Helm chart: the operator-controller Go module of an exact
# release (the Go module proxy serves one version per request; v1.11.0 is the newest it
# serves here) into the Go module cache, and prints the chart's directory (`helm/` of
# the module: the `olmv1/` chart and its values files standard, cert-manager.yaml,
# experimental.yaml) on stdout. e2e/upstream_chart.rs renders it with a real helm
# (hack/build-helm.sh, whose default v3.21.2 is upstream's pin: the chart needs >= 3.17).
# A second run finds the module cached and returns at once.
set -euo pipefail
VERSION="${OLMV1_UPSTREAM_VERSION:-v1.11.0}"
MODULE=github.com/operator-framework/operator-controller
if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is needed once to fetch $MODULE@$VERSION for e2e/upstream_chart.rs" >&2
  exit 1
fi
# `go mod download` outside any module: no go.mod of ours pins it.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! json=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "$MODULE@$VERSION" 2>&1); then
  echo "error: fetching $MODULE@$VERSION failed (the Go module proxy must be reachable the first time: $(go env GOPROXY)):" >&2
  echo "$json" >&2
  exit 1
fi
dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ ! -f "$dir/helm/olmv1/Chart.yaml" ]; then
  echo "error: $MODULE@$VERSION has no helm/olmv1 chart (module in '$dir')" >&2
  exit 1
fi
echo "upstream OLM v1 chart $VERSION: $dir/helm" >&2
echo "$dir/helm"
