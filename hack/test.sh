#!/usr/bin/env bash
# The project's whole test suite, as CI runs it (.ci/run calls exactly this):
# formatting and lints, then every unit, integration and end-to-end test. The
# integration and end-to-end tests start their own real control plane (etcd,
# kube-apiserver, kube-controller-manager) and OCI registries on loopback; the node
# suite (e2e/node.rs) also a real node (containerd + runc, kubelet, kube-scheduler,
# kube-proxy, CoreDNS: hack/build-node.sh builds and installs them, once).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

# Everything the tests need besides the source, checked (and installed, once) before
# the long builds: Debian packages, cargo-deny; Rust and Go are checked.
hack/prereqs.sh test
hack/build-kube.sh
hack/build-node.sh
hack/build-cert-manager.sh
# OLM v0's olm-operator, catalog-operator and opm for e2e/migrate_v0.rs (first run about
# 6 minutes on 2 cores, then cached by version).
hack/build-olm-v0.sh
hack/build-argo-health.sh >/dev/null
# helm v3 for tests/chart.rs, e2e/chart.rs and e2e/upstream_chart.rs (first run about
# 2.5 minutes on 2 cores), and upstream OLM v1's own chart for the last.
hack/build-helm.sh >/dev/null
hack/upstream-chart.sh >/dev/null
export OLMV1_ETCD="$(hack/etcd-path.sh)"
# One build of each test binary, kept whole: incremental-compilation caches would add
# gigabytes to a cold build (CI's) and speed up nothing here.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# Disk: the debug build of every test binary takes about 14 GB the first time (without
# incremental caches), and the tests' control planes, registries and node a few more.
# A disk that fills half-way fails dozens of tests for no visible reason (etcd dies,
# kubeconfigs vanish): say so first.
target_dir="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target_dir"
need_gb=5
[ -d "$target_dir/debug/deps" ] || need_gb=20
for dir in "$target_dir" "${TMPDIR:-/tmp}"; do
  free_gb=$(df -Pk "$dir" | awk 'NR == 2 {print int($4 / 1048576)}')
  if [ "${free_gb:-0}" -lt "$need_gb" ]; then
    echo "error: $free_gb GB free on the file system of $dir; the tests need about $need_gb GB there (the debug build of every test binary takes about 14 GB the first time). Free some space (e.g. cargo clean in other checkouts) or point CARGO_TARGET_DIR / TMPDIR at a larger disk" >&2
    exit 1
  fi
done

echo "== cargo fmt --check"
cargo fmt --all -- --check
if [ ! -d "${CARGO_TARGET_DIR:-target}/debug/deps" ]; then
  echo "== cargo clippy --all-targets -- -D warnings (first run: compiles every dependency, about 10 minutes on 2 cores)"
else
  echo "== cargo clippy --all-targets -- -D warnings"
fi
cargo clippy --quiet --all-targets -- -D warnings

echo "== cargo clippy --lib --bins -- -D warnings (without the testenv and fuzzing features, as shipped)"
cargo clippy --quiet --lib --bins -- -D warnings

# Dependencies: licenses, duplicate versions, sources (deny.toml). The advisories check
# needs the RustSec database from GitHub: it runs with OLMV1_DENY_ADVISORIES=1, or
# offline when a database is already on disk.
echo "== cargo deny check licenses bans sources"
cargo deny --log-level error check licenses bans sources
advisory_dbs="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs"
if [ "${OLMV1_DENY_ADVISORIES:-0}" = 1 ]; then
  echo "== cargo deny check advisories"
  cargo deny --log-level error check advisories
elif [ -n "$(ls -A "$advisory_dbs" 2>/dev/null)" ]; then
  echo "== cargo deny check advisories (offline, database in $advisory_dbs)"
  cargo deny --log-level error check --disable-fetch advisories
else
  echo "(cargo deny advisories skipped: no RustSec database here; OLMV1_DENY_ADVISORIES=1 fetches it)"
fi

echo "== cargo test"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
# The examples (benchmarks) are not linked here: clippy --all-targets above already
# compiles them, and no test runs them (nine large debug binaries fewer to link).
cargo test --lib --bins --tests --no-fail-fast 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(grep -aEo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -aEo '^test result: .*; ([0-9]+) failed' "$log" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
ignored=$(grep -aEo '; ([0-9]+) ignored' "$log" | grep -Eo '[0-9]+' | awk '{s+=$1} END {print s+0}')
# Fuzzing: `cargo test` above already ran every fuzz target un-instrumented over its
# seeds, regression inputs and a few seconds of mutations (tests/fuzz_replay.rs). The
# libFuzzer smoke run is off by default: the instrumented build of every dependency
# takes 15-45 minutes the first time, more than CI can give; OLMV1_FUZZ_SMOKE=1 turns
# it on (the long runs: hack/fuzz.sh [seconds]).
if [ "${OLMV1_FUZZ_SMOKE:-0}" = 1 ]; then
  echo "== fuzz smoke (each fuzz target over its seed corpus)"
  hack/fuzz.sh --smoke || status=1
fi
echo
echo "wall time: $(( $(date +%s) - start ))s"
echo "tests: $passed passed, $failed failed, $ignored skipped"
echo "$passed passed, $failed failed"
if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
  echo "test run FAILED" >&2
  exit 1
fi
