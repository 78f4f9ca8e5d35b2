#!/usr/bin/env bash
# The main job, locally, in one command (walk-through: docs/getting-started.md, "Walk-through"):
#   1. a Kubernetes control plane with a real node (hack/control-plane.sh up --node:
#      containerd + runc, kubelet, kube-scheduler, kube-proxy, CoreDNS, a registry),
#   2. olmv1's image built without a container engine (the builder behind
#      hack/image.sh) and olmv1 deployed from config/ (`kubectl apply -k`, two
#      replicas, leader election, probes),
#   3. a demo catalog of generated bundles (package demo-operator 1.0.0 and 1.1.0)
#      whose operator image really runs,
#   4. a ClusterCatalog and a ClusterExtension installed through an installer
#      ServiceAccount whose RBAC `olmv1 rbac` generated from the rendered bundles,
# then shows the node, olmv1's pods, the catalogs and extensions, the operator's
# running Deployment and `olmv1 status` (with `--explain` for the demo extension), and
# waits for Ctrl-C. Everything it started is stopped on exit. Every long step says what
# it does, how long it usually takes, and how long it took.
#   usage: hack/demo.sh [--no-wait] [--no-node]
#     --no-wait  exit after showing the tables
#     --no-node  no node and no root needed: the controller runs as a local process
#                against a control plane without nodes (the operator never starts)
#   OLMV1_BIN=<path> / OLMV1_TESTENV_BIN=<path> use those olmv1 / olmv1-testenv
#   binaries instead of building them (olmv1-testenv: the test environment, built with
#   the cargo feature `testenv`).
set -euo pipefail
cd "$(dirname "$0")/.."

no_wait=0
use_node=1
for arg in "$@"; do
  case "$arg" in
    --no-wait) no_wait=1 ;;
    --no-node) use_node=0 ;;
    *) echo "usage: $0 [--no-wait] [--no-node]" >&2; exit 2 ;;
  esac
done
# Everything the demo needs besides the source, checked (and installed, once) before the
# long builds.
if [ "$use_node" = 1 ]; then hack/prereqs.sh demo; else hack/prereqs.sh demo-no-node; fi

dir=.cache/demo
ns=demo
ext=demo
package=demo-operator
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"

# `step "what it does" "how long it usually takes"` announces a step; `done_step`
# prints how long it took.
step_started=0
step() {
  step_started=$(date +%s)
  echo "== $1 ($2)"
}
done_step() {
  echo "   done in $(( $(date +%s) - step_started ))s"
}
demo_started=$(date +%s)

if [ -z "${OLMV1_BIN:-}" ] || [ -z "${OLMV1_TESTENV_BIN:-}" ]; then
  if [ ! -x "${CARGO_TARGET_DIR:-target}/debug/olmv1" ]; then
    step "building olmv1 and olmv1-testenv with cargo" "first run only: about 15 minutes on 2 cores; later runs take seconds"
  else
    step "building olmv1 and olmv1-testenv with cargo" "seconds when little changed"
  fi
  cargo build --quiet --features testenv --bin olmv1 --bin olmv1-testenv
  done_step
  target="$(pwd)/${CARGO_TARGET_DIR:-target}"
  case "${CARGO_TARGET_DIR:-}" in /*) target="$CARGO_TARGET_DIR" ;; esac
  OLMV1_BIN="${OLMV1_BIN:-$target/debug/olmv1}"
  OLMV1_TESTENV_BIN="${OLMV1_TESTENV_BIN:-$target/debug/olmv1-testenv}"
fi
export OLMV1_BIN OLMV1_TESTENV_BIN
bin="$OLMV1_BIN"
testenv="$OLMV1_TESTENV_BIN"

# kubectl: the one hack/build-node.sh builds (the control plane's version) if none.
kube_bin="${OLMV1_KUBE_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olmv1/kube/v1.37.1}"
export PATH="$PATH:$kube_bin"
kubectl_() {
  if command -v kubectl >/dev/null 2>&1; then kubectl "$@"; else
    echo "(kubectl is not installed: skipping 'kubectl $*'; hack/build-node.sh builds one)" >&2
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

write_demo_env() {
  cat >"$dir/demo.env" <<ENV
export KUBECONFIG=$KUBECONFIG
export REGISTRY=$REGISTRY
export PATH=\$PATH:$kube_bin
export OLMV1_BIN=$bin
export OLMV1_TESTENV_BIN=$testenv
ENV
}

# The ClusterCatalog, the installer account with generated least-privilege RBAC, and
# the ClusterExtension; waits until the catalog serves and the extension is installed.
install_extension() {
  kubectl_ create namespace "$ns" --dry-run=client -o yaml | kubectl_ apply -f - >/dev/null
  "$bin" rbac "$dir/rendered" --namespace "$ns" --extension "$ext" >"$dir/installer-rbac.yaml"
  kubectl_ apply -f "$dir/installer-rbac.yaml"
  kubectl_ apply -f - <<YAML
apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata:
  name: demo
spec:
  source:
    type: Image
    image:
      ref: $catalog_image
YAML
  # The catalog first: an extension created before its catalog serves resolves again as
  # soon as it does (a GitOps tool applying both at once works), but would show a
  # transient "not being served" Warning in the Events below.
  step "waiting for the ClusterCatalog to serve" "usually 2-10 seconds"
  kubectl_ wait --for=condition=Serving clustercatalog/demo --timeout=120s
  done_step
  kubectl_ apply -f - <<YAML
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
YAML
  step "waiting for the ClusterExtension to install" "usually 5-30 seconds"
  kubectl_ wait --for=condition=Installed clusterextension/"$ext" --timeout=180s
  done_step
}

publish_catalog() { # [operator image]
  rm -rf "$dir/rendered"
  local image_args=()
  if [ -n "${1:-}" ]; then image_args=(--operator-image "$1"); fi
  step "building and pushing the demo's bundle and catalog images" "a few seconds"
  catalog_image="$("$testenv" demo-catalog --registry "$REGISTRY" --package "$package" \
    --version 1.0.0 --version 1.1.0 --tag v1 --render-dir "$dir/rendered" --namespace "$ns" \
    "${image_args[@]}")"
  done_step
  echo "   published catalog $catalog_image ($package 1.0.0, 1.1.0)"
}

# What olmv1 itself says about the extensions (the table, then the demo extension with
# the reasons for every newer bundle); through the API server's service proxy when the
# catalog's URL is an in-cluster Service name.
show_status() {
  echo
  echo "\$ olmv1 status"
  "$bin" status || echo "(olmv1 status failed)" >&2
  echo
  echo "\$ olmv1 status $ext --explain"
  "$bin" status "$ext" --explain || echo "(olmv1 status failed)" >&2
}

finish() {
  echo
  echo "(the demo took $(( $(date +%s) - demo_started ))s)"
  if [ "$no_wait" = 1 ]; then
    exit 0
  fi
  echo "The demo runs. In another shell:  source $dir/demo.env  (then see the walk-through in docs/getting-started.md)"
  echo "Press Ctrl-C to stop everything."
  if [ ${#pids[@]} -gt 0 ]; then wait "${pids[0]}"; else while sleep 3600; do :; done; fi
}

# 1. Control plane (a stale one from an interrupted run is stopped first).
hack/control-plane.sh down "$dir" >/dev/null 2>&1 || true
kube_version_dir="$kube_bin"
if [ "$use_node" = 1 ]; then
  if [ ! -x "$kube_version_dir/kubelet" ]; then
    step "starting the control plane and the node: first building kube-apiserver, kube-controller-manager, kubelet, kube-scheduler, kube-proxy, kubectl and CoreDNS from Go modules" "first run only: about 15-30 minutes on 2 cores, then about 1 minute"
  else
    step "starting the control plane (etcd, kube-apiserver, kube-controller-manager) and the node (containerd, kubelet, kube-scheduler, kube-proxy, CoreDNS, a registry)" "usually about 1 minute"
  fi
  hack/control-plane.sh up --node "$dir"
else
  if [ ! -x "$kube_version_dir/kube-apiserver" ]; then
    step "starting the control plane: first building kube-apiserver and kube-controller-manager from Go modules" "first run only: about 20 minutes on 2 cores, then about 20 seconds"
  else
    step "starting the control plane (etcd, kube-apiserver, kube-controller-manager)" "usually about 20 seconds"
  fi
  hack/control-plane.sh up "$dir"
fi
done_step
# shellcheck disable=SC1091
source "$dir/env.sh"

if [ "$use_node" = 1 ]; then
  # 2. olmv1 in the cluster, from its own image and config/.
  REGISTRY="$OLMV1_NODE_REGISTRY"
  step "building olmv1's image without a container engine (the program, its libraries, a CA bundle, a non-root user) and pushing it" "usually 10-30 seconds"
  strip -o "$dir/olmv1.stripped" "$bin"
  image="$("$testenv" image --program "$dir/olmv1.stripped" --name olmv1 --cmd controller \
    --push "$REGISTRY/olmv1/olmv1:demo" --insecure)"
  done_step
  echo "   $image"
  step "kubectl apply -k config/ (image pinned by digest), then waiting for both replicas to roll out" "usually under a minute"
  "$testenv" deploy --image "$image" --overlay "$dir/overlay" --arg "--insecure-registry=$REGISTRY"
  done_step
  # 3., 4. Catalog and extension; the operator really runs.
  publish_catalog "$OLMV1_WORKLOAD_IMAGE"
  write_demo_env
  install_extension
  step "waiting for the operator's Deployment to become available" "usually 10-30 seconds"
  kubectl_ -n "$ns" rollout status deployment/"$package"-controller --timeout=180s
  done_step
  echo
  kubectl_ get nodes -o wide
  echo
  kubectl_ -n olmv1-system get pods -o wide
  echo
  kubectl_ get clustercatalogs,clusterextensions
  echo
  kubectl_ -n "$ns" get deployments,pods
  show_status
  finish
fi

# Without a node: a local registry and the controller as a local process.
rm -f "$dir/registry.env"
"$testenv" registry --dir "$dir" >"$dir/registry.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 200); do [ -s "$dir/registry.env" ] && break; sleep 0.1; done
[ -s "$dir/registry.env" ] || { echo "the registry did not start: $(cat "$dir/registry.log")" >&2; exit 1; }
# shellcheck disable=SC1091
source "$dir/registry.env"
echo "   registry serving at $REGISTRY"
publish_catalog
write_demo_env

# The controller, as its own ServiceAccount (RBAC from config/).
step "starting the controller as a local process" "a few seconds"
health="$(free_port 8081)"
catalogs="$(free_port 8443)"
"$bin" controller --kubeconfig "$OLMV1_CONTROLLER_KUBECONFIG" \
  --health-probe-bind-address "127.0.0.1:$health" \
  --catalog-server-bind-address "127.0.0.1:$catalogs" --external-address "127.0.0.1:$catalogs" \
  --cache-dir "$dir/cache" --insecure-registry "$REGISTRY" >"$dir/controller.log" 2>&1 &
controller=$!
pids=("$controller" "${pids[@]}")
for _ in $(seq 1 300); do
  curl -fsS "http://127.0.0.1:$health/readyz" >/dev/null 2>&1 && break
  kill -0 "$controller" 2>/dev/null || { echo "the controller exited: $(tail -20 "$dir/controller.log")" >&2; exit 1; }
  sleep 0.1
done
done_step
echo "   controller ready (pid $controller, log $dir/controller.log)"
install_extension
echo
kubectl_ get clustercatalogs,clusterextensions
echo
kubectl_ -n "$ns" get deployments,configmaps,serviceaccounts -l "olm.operatorframework.io/owner-name=$ext"
show_status
finish
