#!/usr/bin/env bash
# Starts or stops a loopback Kubernetes control plane (etcd, kube-apiserver with RBAC,
# kube-controller-manager) with an admin identity and the controller's own non-admin
# identity bound to the ClusterRole in config/.
#   hack/control-plane.sh up   [dir]   # default dir: .cache/testenv
#   hack/control-plane.sh down [dir]
set -euo pipefail
cd "$(dirname "$0")/.."
cmd="${1:-}"; dir="${2:-.cache/testenv}"
case "$cmd" in
  up)
    hack/build-kube.sh
    etcd="$(hack/etcd-path.sh)"
    cargo build --quiet --bin olmv1
    "${CARGO_TARGET_DIR:-target}/debug/olmv1" testenv up --dir "$dir" --etcd "$etcd"
    ;;
  down)
    cargo build --quiet --bin olmv1
    "${CARGO_TARGET_DIR:-target}/debug/olmv1" testenv down --dir "$dir"
    ;;
  *)
    echo "usage: $0 up|down [dir]" >&2; exit 2 ;;
esac
