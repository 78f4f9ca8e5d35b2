#!/usr/bin/env bash
# Builds the helm v3 CLI from its Go module (helm.sh/helm/v3, an exact version: the
# Go module proxy serves one version per request) and caches it, keyed by version:
#   ~/.cache/olmv1/helm/<version>/helm
# tests/chart.rs runs it (helm lint, helm template, helm install on the node cluster)
# and calls this script to find it. Prints the binary's path on stdout (progress goes
# to stderr); a second run finds the cached binary and returns at once.
set -euo pipefail
# v3.21.2: the version upstream OLM v1 (operator-controller v1.11.0) pins; its chart
# needs >= 3.17 (toYamlPretty). One version for our chart and upstream's.
VERSION="${OLMV1_HELM_VERSION:-v3.21.2}"
DIR="${OLMV1_HELM_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olmv1/helm/$VERSION}"
bin="$DIR/helm"
if [ -x "$bin" ]; then
  echo "helm $VERSION: cached in $DIR" >&2
  echo "$bin"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is needed once to build helm $VERSION for the chart tests" >&2
  exit 1
fi
mkdir -p "$DIR"
tmp=$(mktemp -d "$DIR/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "building helm $VERSION (first run only: about 2.5 minutes on 2 cores)..." >&2
# `go install module@version` builds outside any module: no go.mod of ours pins it.
if ! (cd "$tmp" && CGO_ENABLED=0 GOBIN="$tmp/bin" go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$VERSION" \
  "helm.sh/helm/v3/cmd/helm@$VERSION") >"$tmp/build.log" 2>&1; then
  echo "error: building helm $VERSION failed (the Go module proxy must be reachable the first time: $(go env GOPROXY)); last lines of the build log:" >&2
  tail -20 "$tmp/build.log" >&2
  exit 1
fi
mv "$tmp/bin/helm" "$bin"
echo "helm $VERSION: built into $DIR in $(( $(date +%s) - start )) s ($(du -sh "$DIR" | cut -f1))" >&2
echo "$bin"
