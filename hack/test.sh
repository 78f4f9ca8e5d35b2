#!/usr/bin/env bash
# The project's whole test suite, as CI runs it (.ci/run calls exactly this), or one
# tier of it (docs/design/tests.md):
#
#   hack/test.sh               everything: fmt, clippy, cargo-deny, then every tier
#   hack/test.sh unit          the unit tests (`--lib --bins`): Rust only, no registry, no Go
#   hack/test.sh integration   tests/ (one binary): a real control plane, registries, cert-manager, OLM v0
#   hack/test.sh e2e           e2e/ (one binary): the above and a real node
#
# The integration and end-to-end tests start their own real control plane (etcd,
# kube-apiserver, kube-controller-manager) and OCI registries on loopback; the node
# tests also a real node (containerd + runc, kubelet, kube-scheduler, kube-proxy,
# CoreDNS: hack/build-node.sh builds and installs them, once). Each area of tests/ and
# e2e/ (one module: tests/<area>.rs, e2e/<area>.rs) runs in a process of its own, with
# the control plane and controller of that process, as a test binary of its own did.
# At the end: each tier's and each area's wall time, and the slowest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

tier="${1:-all}"
case "$tier" in
  all | unit | integration | e2e) ;;
  -h | --help)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  *)
    echo "error: unknown tier '$tier': hack/test.sh [all|unit|integration|e2e]" >&2
    exit 2
    ;;
esac

# What cannot be installed from here (Rust, Go, root) is checked first, in seconds,
# before any build; the Debian packages are installed, once (hack/prereqs.sh). The long
# prerequisites build later, in the background (below). The unit tier needs Rust only.
prereqs_start=$(date +%s)
[ "$tier" = unit ] || OLMV1_PREREQS_CARGO_DENY=later hack/prereqs.sh test
prereqs_time=$(($(date +%s) - prereqs_start))

# The Rust build is kept between checkouts on this machine, as the Go builds are in
# ~/.cache/olmv1: a fresh clone (CI's) rebuilds only this crate, not its dependencies.
# CARGO_TARGET_DIR=target keeps it in the checkout. One run at a time uses it: the
# test binaries of two checkouts have the same names there.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/olmv1"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/target}"
mkdir -p "$CARGO_TARGET_DIR"
pidfile="$CARGO_TARGET_DIR/.hack-test.pid"
if [ -s "$pidfile" ] && other=$(cat "$pidfile") && [ "$other" != $$ ] && kill -0 "$other" 2>/dev/null &&
  grep -q "hack/test.sh" "/proc/$other/cmdline" 2>/dev/null; then
  echo "error: another hack/test.sh (pid $other) is using $CARGO_TARGET_DIR; wait for it, or give this run a target directory of its own (CARGO_TARGET_DIR=target hack/test.sh)" >&2
  exit 1
fi
echo $$ >"$pidfile"
echo "Rust build: $CARGO_TARGET_DIR"
# The tests' logs (target/tmp/testenv-logs/: runs with a failure are kept) stay in the
# checkout wherever the build goes.
export OLMV1_TEST_TMPDIR="${OLMV1_TEST_TMPDIR:-$PWD/target/tmp}"
mkdir -p "$OLMV1_TEST_TMPDIR"
# One build of each test binary, kept whole: incremental-compilation caches would add
# gigabytes to a cold build (CI's) and speed up nothing here.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# Disk: the debug build of the test binaries takes about 5 GB the first time (without
# incremental caches), and the tests' control planes, registries and node a few more.
# A disk that fills half-way fails dozens of tests for no visible reason (etcd dies,
# kubeconfigs vanish): say so first.
need_gb=5
[ -d "$CARGO_TARGET_DIR/debug/deps" ] || need_gb=12
for dir in "$CARGO_TARGET_DIR" "${TMPDIR:-/tmp}"; do
  free_gb=$(df -Pk "$dir" | awk 'NR == 2 {print int($4 / 1048576)}')
  if [ "${free_gb:-0}" -lt "$need_gb" ]; then
    echo "error: $free_gb GB free on the file system of $dir; the tests need about $need_gb GB there (the first debug build of the test binaries takes about 10 GB with its dependencies). Free some space (e.g. cargo clean in other checkouts) or point CARGO_TARGET_DIR / TMPDIR at a larger disk" >&2
    exit 1
  fi
done

timing=$(mktemp -d)
prereqs_pid=
# A run stopped early stops the background builds too (each build script, and the go
# or cargo under it).
kill_tree() {
  local child
  for child in $(pgrep -P "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}
trap '[ -z "$prereqs_pid" ] || kill_tree "$prereqs_pid"; rm -rf "$timing"; rm -f "$pidfile"' EXIT
status=0

# The long prerequisites, built and installed once in the background while Rust lints
# and builds: cargo-deny, Kubernetes, the node, cert-manager, OLM v0 and opm, helm (a
# fresh machine's first run: about 25 minutes of their own, docs/getting-started.md;
# about a second once cached). The tests wait for them.
if [ "$tier" != unit ]; then
  (
    set -e
    start=$(date +%s)
    hack/prereqs.sh test
    hack/build-kube.sh
    [ "$tier" = integration ] || hack/build-node.sh
    hack/build-cert-manager.sh
    # OLM v0's olm-operator, catalog-operator and opm (tests/migrate_v0.rs,
    # e2e/migrate_v0.rs; first run about 6 minutes on 2 cores, then cached by version).
    hack/build-olm-v0.sh
    hack/build-argo-health.sh >/dev/null
    # helm v3 for tests/chart.rs, e2e/chart.rs and e2e/upstream_chart.rs (first run
    # about 2.5 minutes on 2 cores), and upstream OLM v1's own chart for the last.
    hack/build-helm.sh >/dev/null
    hack/upstream-chart.sh >/dev/null
    echo "builds $(($(date +%s) - start))" >>"$timing/tiers"
  ) >"$timing/prereqs.log" 2>&1 </dev/null &
  prereqs_pid=$!
fi
echo "prereqs $prereqs_time" >>"$timing/tiers"

# Waits for the background builds above, shows what they printed, and stops the run if
# one failed (its error says what to fix).
wait_prereqs() {
  [ -n "$prereqs_pid" ] || return 0
  local waited rc=0
  waited=$(date +%s)
  wait "$prereqs_pid" || rc=$?
  prereqs_pid=
  echo "== prerequisites (built in the background)"
  cat "$timing/prereqs.log"
  echo "waited $(($(date +%s) - waited))" >>"$timing/tiers"
  if [ "$rc" -ne 0 ]; then
    echo "error: a prerequisite failed to build or install (above); nothing was tested" >&2
    exit 1
  fi
  OLMV1_ETCD="$(hack/etcd-path.sh)"
  export OLMV1_ETCD
}

if [ "$tier" = all ]; then
  lint_start=$(date +%s)
  echo "== cargo fmt --check"
  cargo fmt --all -- --check
  if [ ! -d "$CARGO_TARGET_DIR/debug/deps" ]; then
    echo "== cargo clippy --all-targets -- -D warnings (first run: compiles every dependency, about 10 minutes on 2 cores)"
  else
    echo "== cargo clippy --all-targets -- -D warnings"
  fi
  cargo clippy --quiet --all-targets -- -D warnings
  echo "== cargo clippy --lib --bins -- -D warnings (without the testenv and fuzzing features, as shipped)"
  cargo clippy --quiet --lib --bins -- -D warnings
  echo "lint $(($(date +%s) - lint_start))" >>"$timing/tiers"
fi

# The test binaries of the tier: `<kind> <name> <path>` per line, from cargo's build
# messages. The examples (benchmarks) are not linked: clippy --all-targets compiles
# them, and no test runs them.
case "$tier" in
  unit) targets=(--lib --bins) ;;
  integration) targets=(--lib --test integration) ;;
  e2e) targets=(--test e2e) ;;
  all) targets=(--lib --bins --tests) ;;
esac
echo "== cargo test --no-run ${targets[*]}"
build_start=$(date +%s)
cargo test --no-run "${targets[@]}"
cargo test --no-run --message-format=json "${targets[@]}" 2>/dev/null |
  grep -E '"profile":\{[^}]*"test":true' |
  sed -nE 's/.*"target":\{"kind":\["([a-z-]+)"\][^}]*"name":"([^"]+)".*"executable":"([^"]+)".*/\1 \2 \3/p' \
    >"$timing/binaries"
echo "build $(($(date +%s) - build_start))" >>"$timing/tiers"
wait_prereqs

if [ "$tier" = all ]; then
  deny_start=$(date +%s)
  # Dependencies: licenses, duplicate versions, sources (deny.toml). The advisories
  # check needs the RustSec database from GitHub: it runs with OLMV1_DENY_ADVISORIES=1,
  # or offline when a database is already on disk.
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
  echo "deny $(($(date +%s) - deny_start))" >>"$timing/tiers"
fi

# Runs one test process: `run <tier> <label> <exe> [libtest arguments...]`, its output
# shown and kept, its wall time and per-test times recorded. libtest's per-test times
# (`--report-time`) are an unstable option: RUSTC_BOOTSTRAP=1 allows it for the test
# process only (nothing is compiled with it). With `quiet` set the output is shown
# whole when the process ends (areas run side by side).
run() {
  local tier="$1" label="$2" exe="$3"
  shift 3
  local out="$timing/out.$tier.$label" begun rc=0
  begun=$(date +%s)
  if [ -z "${quiet:-}" ]; then
    echo "== $tier: $label"
    RUSTC_BOOTSTRAP=1 "$exe" -Z unstable-options --report-time "$@" </dev/null 2>&1 | tee "$out" || rc=$?
  else
    RUSTC_BOOTSTRAP=1 "$exe" -Z unstable-options --report-time "$@" </dev/null >"$out" 2>&1 || rc=$?
    flock "$timing/print.lock" sh -c 'echo "== $1: $2"; cat "$3"' _ "$tier" "$label" "$out"
  fi
  flock "$timing/print.lock" sh -c '
    echo "$1 $2 $3" >>"$4/areas"
    sed -nE "s/^test ([^ ]+) \.\.\. (ok|FAILED) <([0-9.]+)s>\$/\3 \1/p" "$5" >>"$4/tests"
    cat "$5" >>"$4/log"
    [ "$6" -eq 0 ] || echo "$1 $2" >>"$4/failed-processes"
  ' _ "$tier" "$label" "$(($(date +%s) - begun))" "$timing" "$out" "$rc"
}

# Each area (the first segment of a test's path) of a shared binary in a process of its
# own, in OLMV1_TEST_JOBS lanes side by side (default 2; 1: one area at a time). Each
# lane draws the loopback ports of its control planes, registries and controllers from
# a slice of its own (OLMV1_TEST_PORT_SLOT of OLMV1_TEST_PORT_SLOTS), so two processes
# never race for a port. The integration tier's lanes take the next area from one
# queue; in the e2e tier the areas on the machine's one node (their source asks for
# `node_cluster`) are one lane's, one at a time, and the others the other lanes'.
# Each queue holds the longest areas of the last run first.
area_times="$CARGO_TARGET_DIR/.hack-test-areas"
touch "$area_times"
run_by_area() {
  local tier="$1" exe="$2" dir area jobs="${OLMV1_TEST_JOBS:-2}" quiet= lane queue
  [ "$tier" = integration ] && dir=tests || dir=e2e
  [ "$jobs" -gt 1 ] && quiet=1
  "$exe" --list --format terse </dev/null 2>/dev/null | sed -n 's/: test$//p' >"$timing/list.$tier"
  # The queues: areas a last run timed, longest first, after those it did not (new ones).
  cut -d: -f1 "$timing/list.$tier" | sort -u | while read -r area; do
    queue=all
    if [ "$tier" = e2e ] && [ "$jobs" -gt 1 ]; then
      grep -q node_cluster "$dir/$area.rs" 2>/dev/null && queue=node || queue=plane
    fi
    echo "$(awk -v t="$tier" -v a="$area" '$1 == t && $2 == a {print $3; f=1} END {if (!f) print 1000000}' "$area_times") $area $queue"
  done | sort -k1,1nr -k2 >"$timing/queued.$tier"
  for queue in all node plane; do
    awk -v q="$queue" '$3 == q {print $2}' "$timing/queued.$tier" >"$timing/queue.$tier.$queue"
  done
  next_area() {
    flock "$timing/queue.lock" sh -c 'head -n 1 "$1"; sed -i 1d "$1"' _ "$timing/queue.$tier.$1"
  }
  for lane in $(seq 0 $((jobs - 1))); do
    queue=all
    [ "$tier" = e2e ] && [ "$jobs" -gt 1 ] && { [ "$lane" = 0 ] && queue=node || queue=plane; }
    (
      if [ "$jobs" -gt 1 ]; then
        export OLMV1_TEST_PORT_SLOT="$lane" OLMV1_TEST_PORT_SLOTS="$jobs"
      fi
      while area=$(next_area "$queue") && [ -n "$area" ]; do
        # shellcheck disable=SC2046
        run "$tier" "$area" "$exe" --exact $(grep "^$area::" "$timing/list.$tier")
      done
    ) &
  done
  wait
}

run_tier() {
  local tier="$1" begun kind name exe
  begun=$(date +%s)
  # The list on descriptor 3: a test process must not read it from its standard input.
  while read -r kind name exe <&3; do
    case "$tier:$kind:$name" in
      # The library's tests that need a docker-registry process (modules named
      # `with_registry`) belong to the integration tier.
      unit:lib:*) run unit "$kind-$name" "$exe" --skip ::with_registry:: ;;
      unit:bin:*) run unit "$kind-$name" "$exe" ;;
      integration:lib:*) run integration "$kind-$name-with-registry" "$exe" ::with_registry:: ;;
      integration:test:integration | e2e:test:e2e) run_by_area "$tier" "$exe" ;;
      integration:test:e2e | e2e:test:integration | e2e:lib:* | e2e:bin:* | *:bench:* | *:example:*) ;;
      # Another test target (Cargo.toml lists these two): a process of its own.
      integration:test:*) run integration "$name" "$exe" ;;
    esac
  done 3<"$timing/binaries"
  echo "$tier $(($(date +%s) - begun))" >>"$timing/tiers"
}

case "$tier" in
  all) for t in unit integration e2e; do run_tier "$t"; done ;;
  *) run_tier "$tier" ;;
esac

# Fuzzing: the tests above already ran every fuzz target un-instrumented over its
# seeds, regression inputs and a few seconds of mutations (tests/fuzz_replay.rs). The
# libFuzzer smoke run is off by default: the instrumented build of every dependency
# takes 15-45 minutes the first time, more than CI can give; OLMV1_FUZZ_SMOKE=1 turns
# it on (the long runs: hack/fuzz.sh [seconds]).
if [ "${OLMV1_FUZZ_SMOKE:-0}" = 1 ]; then
  echo "== fuzz smoke (each fuzz target over its seed corpus)"
  hack/fuzz.sh --smoke || status=1
fi

log="$timing/log"
touch "$log" "$timing/areas" "$timing/tests"
# The areas' times, for the order of the next run's queue (tiers run again keep theirs).
awk 'NR == FNR {ran[$1 " " $2] = 1; print; next} !(($1 " " $2) in ran)' "$timing/areas" "$area_times" \
  >"$area_times.new" && mv "$area_times.new" "$area_times"
[ ! -s "$timing/failed-processes" ] || status=1
passed=$(grep -aEo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -aEo '^test result: .*; ([0-9]+) failed' "$log" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
ignored=$(grep -aEo '; ([0-9]+) ignored' "$log" | grep -Eo '[0-9]+' | awk '{s+=$1} END {print s+0}')
echo
echo "== timing (seconds)"
echo "tiers:"
awk '{printf "  %-12s %6d\n", $1, $2}' "$timing/tiers"
echo "test processes, slowest first:"
sort -k3,3nr "$timing/areas" | awk '{printf "  %-12s %-28s %6d\n", $1, $2, $3}'
echo "slowest 15 tests:"
sort -k1,1gr "$timing/tests" | awk 'NR <= 15' | awk '{printf "  %8.1f  %s\n", $1, $2}'
if [ -s "$timing/failed-processes" ]; then
  echo "failed test processes (their logs: $OLMV1_TEST_TMPDIR/testenv-logs/):"
  sed 's/^/  /' "$timing/failed-processes"
  grep -aE '^test .* \.\.\. FAILED' "$log" | sed 's/^/  /' || true
fi
echo
echo "wall time: $(($(date +%s) - start))s"
echo "tests: $passed passed, $failed failed, $ignored skipped"
echo "$passed passed, $failed failed"
if [ "$status" -ne 0 ] || [ "$failed" -ne 0 ] || [ "$passed" -eq 0 ]; then
  echo "test run FAILED" >&2
  exit 1
fi
