#!/usr/bin/env bash
# The main job, locally, in one command (walk-through: hack/DEMO.md):
#   1. a loopback Kubernetes control plane (hack/control-plane.sh up),
#   2. a loopback OCI registry (`olmv1-testenv registry`),
#   3. a demo catalog of generated bundles (package demo-operator 1.0.0 and 1.1.0),
#   4. the controller running as its own least-privilege ServiceAccount,
#   5. a ClusterCatalog and a ClusterExtension installed through an installer
#      ServiceAccount whose RBAC `olmv1 rbac` generated from the rendered bundles,
# then shows `kubectl get clustercatalogs,clusterextensions` and waits for Ctrl-C.
# Everything it started is stopped on exit, Ctrl-C or error.
#   usage: hack/demo.sh [--no-wait]     (--no-wait: exit after showing the tables)
#   OLMV1_BIN=<path> / OLMV1_TESTENV_BIN=<path> use those olmv1 / olmv1-testenv
#   binaries instead of building them (olmv1-testenv: the test environment, built with
#   the cargo feature `testenv`).
set -euo pipefail
cd "$(dirname "$0")/.."

no_wait=0
case "${1:-}" in
  --no-wait) no_wait=1 ;;
  "") ;;
  *) echo "usage: $0 [--no-wait]" >&2; exit 2 ;;
esac

dir=.cache/demo
ns=demo
ext=demo
package=demo-operator
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

if [ -z "${OLMV1_BIN:-}" ] || [ -z "${OLMV1_TESTENV_BIN:-}" ]; then
  started=$(date +%s)
  if [ ! -x "${CARGO_TARGET_DIR:-target}/debug/olmv1" ]; then
    echo "== building olmv1 and olmv1-testenv (first run: about 10 minutes on 2 cores; later runs take seconds)"
  else
    echo "== building olmv1 and olmv1-testenv"
  fi
  cargo build --quiet --features testenv --bin olmv1 --bin olmv1-testenv
  echo "   built in $(( $(date +%s) - started ))s"
  target="$(pwd)/${CARGO_TARGET_DIR:-target}"
  case "${CARGO_TARGET_DIR:-}" in /*) target="$CARGO_TARGET_DIR" ;; esac
  OLMV1_BIN="${OLMV1_BIN:-$target/debug/olmv1}"
  OLMV1_TESTENV_BIN="${OLMV1_TESTENV_BIN:-$target/debug/olmv1-testenv}"
fi
export OLMV1_BIN OLMV1_TESTENV_BIN
bin="$OLMV1_BIN"
testenv="$OLMV1_TESTENV_BIN"

kubectl_() {
  if command -v kubectl >/dev/null 2>&1; then kubectl "$@"; else
    echo "(kubectl is not installed: skipping 'kubectl $*')" >&2
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
    || echo "$1"
}

pids=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  trap '' PIPE # a closed terminal or pipe must not stop the cleanup
  set +e
  echo
  echo "stopping the demo..."
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  hack/control-plane.sh down "$dir" || true
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. Control plane (a stale one from an interrupted run is stopped first).
hack/control-plane.sh down "$dir" >/dev/null 2>&1 || true
hack/control-plane.sh up "$dir"
# shellcheck disable=SC1091
source "$dir/env.sh"

# 2. Registry.
rm -f "$dir/registry.env"
"$testenv" registry --dir "$dir" >"$dir/registry.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do [ -s "$dir/registry.env" ] && break; sleep 0.1; done
[ -s "$dir/registry.env" ] || { echo "the registry did not start: $(cat "$dir/registry.log")" >&2; exit 1; }
# shellcheck disable=SC1091
source "$dir/registry.env"
echo "registry serving at $REGISTRY"

# 3. Demo catalog (and the bundles rendered for the installer RBAC).
rm -rf "$dir/rendered"
catalog_image="$("$testenv" demo-catalog --registry "$REGISTRY" --package "$package" \
  --version 1.0.0 --version 1.1.0 --tag v1 --render-dir "$dir/rendered" --namespace "$ns")"
echo "published catalog $catalog_image ($package 1.0.0, 1.1.0)"
cat >"$dir/demo.env" <<EOF
export KUBECONFIG=$KUBECONFIG
export REGISTRY=$REGISTRY
export OLMV1_BIN=$bin
export OLMV1_TESTENV_BIN=$testenv
EOF

# 4. The controller, as its own ServiceAccount (RBAC from config/).
health="$(free_port 8081)"
catalogs="$(free_port 8443)"
"$bin" controller --kubeconfig "$OLMV1_CONTROLLER_KUBECONFIG" \
  --health-probe-bind-address "127.0.0.1:$health" \
  --catalog-server-bind-address "127.0.0.1:$catalogs" --external-address "127.0.0.1:$catalogs" \
  --cache-dir "$dir/cache" --insecure-registry "$REGISTRY" >"$dir/controller.log" 2>&1 &
controller=$!
pids+=("$controller")
for _ in $(seq 1 300); do
  curl -fsS "http://127.0.0.1:$health/readyz" >/dev/null 2>&1 && break
  kill -0 "$controller" 2>/dev/null || { echo "the controller exited: $(tail -20 "$dir/controller.log")" >&2; exit 1; }
  sleep 0.1
done
echo "controller ready (pid $controller, log $dir/controller.log)"

# 5. Catalog, installer account with generated least-privilege RBAC, extension.
kubectl_ create namespace "$ns" --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
"$bin" rbac "$dir/rendered" --namespace "$ns" --extension "$ext" >"$dir/installer-rbac.yaml"
kubectl_ apply -f "$dir/installer-rbac.yaml"
kubectl_ apply -f - <<EOF
apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata:
  name: demo
spec:
  source:
    type: Image
    image:
      ref: $catalog_image
---
apiVersion: olm.operatorframework.io/v1
kind: ClusterExtension
metadata:
  name: $ext
spec:
  namespace: $ns
  serviceAccount:
    name: $ext-installer
  source:
    sourceType: Catalog
    catalog:
      packageName: $package
EOF
kubectl_ wait --for=condition=Serving clustercatalog/demo --timeout=120s
kubectl_ wait --for=condition=Installed clusterextension/"$ext" --timeout=180s
echo
kubectl_ get clustercatalogs,clusterextensions
echo
kubectl_ -n "$ns" get deployments,configmaps,serviceaccounts -l "olm.operatorframework.io/owner-name=$ext"
echo
if [ "$no_wait" = 1 ]; then
  exit 0
fi
echo "The demo runs. In another shell:  source $dir/demo.env  (then see hack/DEMO.md)"
echo "Press Ctrl-C to stop everything."
wait "$controller"
