#!/usr/bin/env bash
# Builds kube-apiserver and kube-controller-manager from the k8s.io/kubernetes Go module
# (through the wrapper module in hack/kube) and caches them outside target/, keyed by
# version. A second run finds the cached binaries and returns in well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v1.37.1
MINOR=37
BIN_DIR="${OLMV1_KUBE_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olmv1/kube/$VERSION}"

if [ -x "$BIN_DIR/kube-apiserver" ] && [ -x "$BIN_DIR/kube-controller-manager" ] \
   && "$BIN_DIR/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $VERSION"; then
  echo "kube binaries $VERSION: cached in $BIN_DIR"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "error: Go is not installed; it is needed once to build kube-apiserver $VERSION (install Go >= 1.26, e.g. apt-get install golang, then rerun)." >&2
  exit 1
fi

echo "building kube-apiserver and kube-controller-manager $VERSION (first run only: a few minutes)..."
mkdir -p "$BIN_DIR"
tmp=$(mktemp -d "$BIN_DIR/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean"
cd hack/kube
if ! go mod download k8s.io/kubernetes >"$tmp/download.log" 2>&1; then
  echo "error: cannot download k8s.io/kubernetes $VERSION from the Go module proxy ($(go env GOPROXY)); check network access to the proxy or set GOPROXY. Details:" >&2
  tail -5 "$tmp/download.log" >&2
  exit 1
fi
if ! CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
     k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager >"$tmp/build.log" 2>&1; then
  echo "error: building the Kubernetes binaries failed; last lines of the build log:" >&2
  tail -20 "$tmp/build.log" >&2
  exit 1
fi
mv "$tmp/kube-apiserver" "$tmp/kube-controller-manager" "$BIN_DIR/"
echo "kube binaries $VERSION: built into $BIN_DIR"
