#!/usr/bin/env bash
# Builds hack/argo-health (the Argo CD health-check driver: gopher-lua, the interpreter
# Argo CD runs health.lua scripts with) and caches it outside target/, keyed by the
# hash of its sources. Prints the binary's path on stdout (progress goes to stderr); a
# second run finds the cached binary and returns at once. tests/argo_health.rs calls
# this script to find the binary.
set -euo pipefail
cd "$(dirname "$0")/argo-health"
key=$(cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)
BIN_DIR="${OLMV1_ARGO_HEALTH_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olmv1/argo-health/$key}"
bin="$BIN_DIR/argo-health"
if [ -x "$bin" ]; then
  echo "argo-health: cached in $BIN_DIR" >&2
  echo "$bin"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is not installed; it is needed once to build hack/argo-health (install Go >= 1.26, then rerun)." >&2
  exit 1
fi
echo "building hack/argo-health (gopher-lua; first run only, under a minute)..." >&2
mkdir -p "$BIN_DIR"
tmp=$(mktemp -d "$BIN_DIR/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if ! CGO_ENABLED=0 go build -trimpath -o "$tmp/argo-health" . >"$tmp/build.log" 2>&1; then
  echo "error: building hack/argo-health failed (the Go module proxy must be reachable the first time: $(go env GOPROXY)); last lines of the build log:" >&2
  tail -20 "$tmp/build.log" >&2
  exit 1
fi
mv "$tmp/argo-health" "$bin"
echo "argo-health: built into $BIN_DIR" >&2
echo "$bin"
