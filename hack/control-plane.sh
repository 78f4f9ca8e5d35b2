#!/usr/bin/env bash
# Starts or stops a loopback Kubernetes control plane (etcd, kube-apiserver with RBAC,
# kube-controller-manager) with an admin identity and the controller's own non-admin
# identity bound to the ClusterRole in config/.
#   hack/control-plane.sh up   [dir]   # default dir: .cache/testenv
#   hack/control-plane.sh down [dir]
# OLMV1_BIN=<path> / OLMV1_ETCD=<path> use that olmv1 / etcd binary instead of building.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd="${1:-}"; dir="${2:-.cache/testenv}"
case "$cmd" in
  up)
    hack/build-kube.sh
    etcd="${OLMV1_ETCD:-$(hack/etcd-path.sh)}"
    [ -n "${OLMV1_BIN:-}" ] || cargo build --quiet --bin olmv1
    "${OLMV1_BIN:-${CARGO_TARGET_DIR:-target}/debug/olmv1}" testenv up --dir "$dir" --etcd "$etcd"
    ;;
  down)
    [ -n "${OLMV1_BIN:-}" ] || cargo build --quiet --bin olmv1
    "${OLMV1_BIN:-${CARGO_TARGET_DIR:-target}/debug/olmv1}" testenv down --dir "$dir"
    ;;
  *)
    echo "usage: $0 up|down [dir]" >&2; exit 2 ;;
esac
