#!/usr/bin/env bash
# Builds OLM v0 ("classic" OLM) for the tests of `olmv1 migrate` (docs/how-to/switch-from-olm-v0.md):
# olm-operator and catalog-operator from the Go module
# github.com/operator-framework/operator-lifecycle-manager, and opm (to serve a catalog
# over gRPC for a CatalogSource) from github.com/operator-framework/operator-registry,
# at the exact versions below, and caches them, keyed by version:
#   ~/.cache/olmv1/olm-v0/<version>/{olm,catalog,crds/*.yaml}
#   ~/.cache/olmv1/opm/<version>/opm
# The CRDs are copied from the module's deploy/chart/crds. Neither module has replace directives, so
# each builds inside its own module directory with its own go.mod and go.sum. A second
# run finds everything cached and returns at once (no network needed).
#
# First run: about 6 minutes on 2 cores for the three programs (364 s measured on this
# project's 2-core machine); then cached by version.
# tests/support/olm_v0_run.rs runs olm-operator, catalog-operator and `opm serve`
# (e2e/migrate_v0.rs); hack/test.sh builds them all.
#
# --crds-only: only OLM v0's CRDs (one module download, no build), enough for the
# tests that lay v0 objects down themselves (tests/migrate_v0.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
OLM_MODULE=github.com/operator-framework/operator-lifecycle-manager
OLM_VERSION=v0.38.0
OPM_MODULE=github.com/operator-framework/operator-registry
OPM_VERSION=v1.60.0
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/olmv1"
OLM_DIR="${OLMV1_OLM_V0_DIR:-$CACHE/olm-v0/$OLM_VERSION}"
OPM_DIR="${OLMV1_OPM_DIR:-$CACHE/opm/$OPM_VERSION}"

crds_cached() { [ -s "$OLM_DIR/crds/0000_50_olm_00-subscriptions.crd.yaml" ]; }
olm_cached() { [ -x "$OLM_DIR/olm" ] && [ -x "$OLM_DIR/catalog" ] && crds_cached; }
opm_cached() { [ -x "$OPM_DIR/opm" ]; }
if olm_cached && opm_cached; then
  echo "OLM v0 $OLM_VERSION and opm $OPM_VERSION: cached in $OLM_DIR and $OPM_DIR"
  exit 0
fi
command -v go >/dev/null || { echo "error: Go is needed once to build OLM v0 $OLM_VERSION and opm $OPM_VERSION for the tests" >&2; exit 1; }

# Downloads module@version into the module cache and prints its directory.
module_dir() {
  local json
  if ! json=$(go mod download -json "$1@$2" 2>&1); then
    echo "error: cannot download $1 $2 from the Go module proxy ($(go env GOPROXY)):" >&2
    echo "$json" | tail -5 >&2
    return 1
  fi
  echo "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# build <module dir> <output dir> <tags> <package>...: a static build into <output dir>.
build() {
  local src=$1 out=$2 tags=$3
  shift 3
  if ! (cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -tags "$tags" -ldflags "-s -w" -o "$out/" "$@") >"$out/build.log" 2>&1; then
    echo "error: building $* in $src failed; last lines of the build log:" >&2
    tail -20 "$out/build.log" >&2
    return 1
  fi
}

# copy_crds <module dir>: the CRDs of the OLM v0 module into the cache.
copy_crds() {
  local tmp
  mkdir -p "$OLM_DIR"
  tmp=$(mktemp -d "$OLM_DIR/.crds-XXXXXX")
  cp "$1"/deploy/chart/crds/*.yaml "$tmp/"
  chmod u+w "$tmp"/*.yaml
  rm -rf "$OLM_DIR/crds"
  mv "$tmp" "$OLM_DIR/crds"
}

start=$(date +%s)
if [ "${1:-}" = --crds-only ]; then
  if crds_cached; then
    echo "OLM v0 $OLM_VERSION CRDs: cached in $OLM_DIR/crds"
  else
    copy_crds "$(module_dir "$OLM_MODULE" "$OLM_VERSION")"
    echo "OLM v0 $OLM_VERSION CRDs: copied into $OLM_DIR/crds in $(( $(date +%s) - start )) s"
  fi
  exit 0
fi
if ! olm_cached; then
  echo "building OLM v0 $OLM_VERSION olm-operator and catalog-operator (first run only; with opm about 6 minutes on 2 cores)..."
  src=$(module_dir "$OLM_MODULE" "$OLM_VERSION")
  mkdir -p "$OLM_DIR"
  tmp=$(mktemp -d "$OLM_DIR/.build-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  build "$src" "$tmp" "" ./cmd/olm ./cmd/catalog
  copy_crds "$src"
  mv "$tmp/olm" "$tmp/catalog" "$OLM_DIR/"
  rm -rf "$tmp"
fi
if ! opm_cached; then
  echo "building opm $OPM_VERSION (first run only)..."
  src=$(module_dir "$OPM_MODULE" "$OPM_VERSION")
  mkdir -p "$OPM_DIR"
  tmp=$(mktemp -d "$OPM_DIR/.build-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # opm's own build tags (its Makefile): OpenPGP in Go instead of gpgme (cgo); json1 for
  # the deprecated SQLite catalogs, which a build without cgo cannot open anyway.
  build "$src" "$tmp" "json1,containers_image_openpgp" ./cmd/opm
  mv "$tmp/opm" "$OPM_DIR/"
  rm -rf "$tmp"
fi
echo "OLM v0 $OLM_VERSION and opm $OPM_VERSION: built into $OLM_DIR and $OPM_DIR in $(( $(date +%s) - start )) s"
