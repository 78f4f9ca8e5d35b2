#!/usr/bin/env bash
# The main job, locally: start the loopback control plane, then run the controller as
# its own least-privilege ServiceAccount until Ctrl-C, then stop everything.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.cache/demo
hack/control-plane.sh up "$dir"
trap 'hack/control-plane.sh down "$dir"' EXIT
# shellcheck disable=SC1091
source "$dir/env.sh"
cargo build --quiet --bin olmv1
bin="${CARGO_TARGET_DIR:-target}/debug/olmv1"
"$bin" controller --kubeconfig "$OLMV1_CONTROLLER_KUBECONFIG" --health-probe-bind-address 127.0.0.1:8081 &
controller=$!
trap 'kill $controller 2>/dev/null; wait $controller 2>/dev/null; hack/control-plane.sh down "$dir"' EXIT
for _ in $(seq 1 100); do
  curl -fsS http://127.0.0.1:8081/readyz >/dev/null 2>&1 && break
  sleep 0.1
done
echo
echo "controller ready (pid $controller, health on http://127.0.0.1:8081/readyz)"
kubectl get clustercatalogs,clusterextensions
echo
echo "In another shell:  source $dir/env.sh && kubectl get clusterextensions,clustercatalogs"
if [ -t 0 ]; then
  echo "Press Ctrl-C to stop."
  wait $controller
fi
