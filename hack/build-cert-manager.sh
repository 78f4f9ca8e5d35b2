#!/usr/bin/env bash
# Builds the test environment's cert-manager from the cert-manager Go module (through
# the wrapper module in hack/cert-manager: its controller and cainjector programs use
# cert-manager's own controller packages) and caches, keyed by version:
#   ~/.cache/olmv1/cert-manager/<version>/{controller,cainjector,crds/*.yaml}
# The CRDs are copied from the module's deploy/crds. src/testenv/cert_manager.rs runs
# them against the test control plane. A second run finds everything cached and
# returns at once.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=$(awk '$1 == "github.com/cert-manager/cert-manager" {print $2; exit}' hack/cert-manager/go.mod)
DIR="${OLMV1_CERT_MANAGER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olmv1/cert-manager/$VERSION}"

if [ -x "$DIR/controller" ] && [ -x "$DIR/cainjector" ] && [ -s "$DIR/crds/cert-manager.io_certificates.yaml" ]; then
  echo "cert-manager $VERSION: cached in $DIR"
  exit 0
fi
command -v go >/dev/null || { echo "error: Go is needed once to build cert-manager $VERSION for the test environment" >&2; exit 1; }

mkdir -p "$DIR"
tmp=$(mktemp -d "$DIR/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
echo "building cert-manager $VERSION controller and cainjector (first run only: about 10 minutes on 2 cores)..."
cd hack/cert-manager
if ! go mod download github.com/cert-manager/cert-manager >"$tmp/download.log" 2>&1; then
  echo "error: cannot download github.com/cert-manager/cert-manager $VERSION from the Go module proxy ($(go env GOPROXY)). Details:" >&2
  tail -5 "$tmp/download.log" >&2
  exit 1
fi
src=$(go list -m -f '{{.Dir}}' github.com/cert-manager/cert-manager)
if ! CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/" ./controller ./cainjector >"$tmp/build.log" 2>&1; then
  echo "error: building cert-manager failed; last lines of the build log:" >&2
  tail -20 "$tmp/build.log" >&2
  exit 1
fi
mkdir -p "$tmp/crds"
cp "$src"/deploy/crds/*.yaml "$tmp/crds/"
chmod u+w "$tmp"/crds/*.yaml
rm -rf "$DIR/crds"
mv "$tmp/crds" "$DIR/crds"
mv "$tmp/controller" "$tmp/cainjector" "$DIR/"
echo "cert-manager $VERSION: built into $DIR in $(( $(date +%s) - start )) s ($(du -sh "$DIR" | cut -f1))"
