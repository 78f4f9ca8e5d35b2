#!/usr/bin/env bash
# The project's whole test suite, as CI runs it (.ci/run calls exactly this):
# formatting and lints, then every unit, integration and end-to-end test. The
# integration and end-to-end tests start their own real control plane (etcd,
# kube-apiserver, kube-controller-manager) and OCI registries on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

hack/build-kube.sh
hack/registry.sh check
export OLMV1_ETCD="$(hack/etcd-path.sh)"

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy --all-targets -- -D warnings"
cargo clippy --quiet --all-targets -- -D warnings

echo "== cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --all-targets --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(grep -Eo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '^test result: .*; ([0-9]+) failed' "$log" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
ignored=$(grep -Eo '; ([0-9]+) ignored' "$log" | grep -Eo '[0-9]+' | awk '{s+=$1} END {print s+0}')
echo
echo "wall time: $(( $(date +%s) - start ))s"
echo "tests: $passed passed, $failed failed, $ignored skipped"
echo "$passed passed, $failed failed"
if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
  echo "test run FAILED" >&2
  exit 1
fi
