#!/usr/bin/env bash
# Starts or stops a loopback Kubernetes control plane (etcd, kube-apiserver with RBAC,
# kube-controller-manager) with an admin identity and the controller's own non-admin
# identity bound to the ClusterRole in config/; with --node, also a real node
# (containerd + runc, kubelet, kube-scheduler, kube-proxy, CoreDNS, and a registry pods
# reach; needs root; hack/build-node.sh builds and installs what it needs); with
# --cert-manager, also cert-manager's controller and cainjector (hack/build-cert-manager.sh).
#   hack/control-plane.sh up   [--node] [--cert-manager] [dir]   # default dir: .cache/testenv
#   hack/control-plane.sh down [dir]
# The work is done by `olmv1-testenv`, the test-environment binary (built with the cargo
# feature `testenv`; the shipped `olmv1` binary does not contain it).
# OLMV1_TESTENV_BIN=<path> / OLMV1_ETCD=<path> use that olmv1-testenv / etcd binary
# instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd="${1:-}"; shift || true
node=()
cert_manager=()
while [ "${1:-}" = "--node" ] || [ "${1:-}" = "--cert-manager" ]; do
  if [ "$1" = "--node" ]; then node=(--node); else cert_manager=(--cert-manager); fi
  shift
done
dir="${1:-.cache/testenv}"
testenv() {
  [ -n "${OLMV1_TESTENV_BIN:-}" ] || cargo build --quiet --features testenv --bin olmv1-testenv
  "${OLMV1_TESTENV_BIN:-${CARGO_TARGET_DIR:-target}/debug/olmv1-testenv}" "$@"
}
case "$cmd" in
  up)
    hack/build-kube.sh
    if [ ${#node[@]} -gt 0 ]; then hack/build-node.sh; fi
    if [ ${#cert_manager[@]} -gt 0 ]; then hack/build-cert-manager.sh; fi
    etcd="${OLMV1_ETCD:-$(hack/etcd-path.sh)}"
    testenv up --dir "$dir" --etcd "$etcd" "${node[@]}" "${cert_manager[@]}"
    ;;
  down)
    testenv down --dir "$dir"
    ;;
  *)
    echo "usage: $0 up [--node] [--cert-manager] [dir] | down [dir]" >&2; exit 2 ;;
esac
