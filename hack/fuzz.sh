#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo fuzz / libFuzzer) of the parsers that read outside data:
# the targets are in fuzz/fuzz_targets (see fuzz/Cargo.toml).
#
#   hack/fuzz.sh [SECONDS] [TARGET...]   fuzz each target (default: all) for SECONDS
#                                        (default 60), one after the other
#   hack/fuzz.sh --smoke [TARGET...]     run each target once over its seed corpus only
#                                        (a few seconds per target; for the test command)
#   hack/fuzz.sh --list                  print the target names
#
# Prints executions and time per target; exits non-zero when a target crashed, hung or
# ran out of memory (the input is saved in fuzz/artifacts/<target>/; reproduce with
# `fuzz/target/x86_64-unknown-linux-gnu/release/<target> <file>`).
#
# The toolchain is stable: cargo-fuzz's nightly flags are enabled with RUSTC_BOOTSTRAP=1.
# No sanitizer (`-s none`): the project has no unsafe code, and instrumenting the C
# dependencies (aws-lc, jemalloc) for ASan costs far more build time than it finds;
# libFuzzer still reports panics (overflow checks and debug assertions are on),
# timeouts (-timeout) and memory blow-ups (-rss_limit_mb / -malloc_limit_mb).
#
# Corpora: fuzz/seeds/<target>/ (small, committed) plus, when ../shared/fixtures exists
# ($OLMV1_SHARED_DIR overrides ../shared), seeds generated from the real bundles and
# catalogs there (never copied into the repository); the working corpus is
# fuzz/corpus/<target>/ (ignored by git, kept between runs so coverage accumulates).
set -euo pipefail
cd "$(dirname "$0")/.."

targets_all=(fbc_parse bundle_load bundle_yaml unpack_layer image_reference version_range crd_compare catalog_query permissions index_ignore)
mode=fuzz
seconds=60
case "${1:-}" in
  --smoke) mode=smoke; shift ;;
  --list) printf '%s\n' "${targets_all[@]}"; exit 0 ;;
  ''|*[!0-9]*) ;;
  *) seconds=$1; shift ;;
esac
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${targets_all[@]}")

export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz is not installed: installing it from crates.io (cargo install --locked cargo-fuzz); a few minutes, once"
  cargo install --quiet --locked cargo-fuzz
fi
if [ ! -d fuzz/target/x86_64-unknown-linux-gnu/release ]; then
  echo "== cargo fuzz build (first run: an instrumented build of every dependency, about 45 minutes on 2 busy cores; then seconds)"
else
  echo "== cargo fuzz build"
fi
build_args=(-s none)
[ ${#targets[@]} -eq 1 ] && build_args+=("${targets[0]}")
if ! cargo fuzz build "${build_args[@]}" > "${TMPDIR:-/tmp}/olmv1-fuzz-build.log" 2>&1; then
  grep -v '^ *Compiling' "${TMPDIR:-/tmp}/olmv1-fuzz-build.log" | tail -40
  echo "cargo fuzz build failed"; exit 1
fi
bin_dir=fuzz/target/x86_64-unknown-linux-gnu/release

shared="${OLMV1_SHARED_DIR:-../shared}"
fixtures="$shared/fixtures"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Seeds generated from the fixtures (other people's data: read at run time only).
fixture_seeds() {
  local target=$1 out=$2
  [ -d "$fixtures" ] || return 0
  case $target in
    fbc_parse)
      find "$fixtures/catalogs" -name 'catalog.yaml' -size -200k | while read -r f; do
        cp "$f" "$out/fixture-$(echo "$f" | md5sum | cut -c1-10).yaml"; done ;;
    bundle_load)
      for b in "$fixtures"/bundles/*/*/; do
        [ "$(du -sk "$b" | cut -f1)" -lt 300 ] || continue
        local seed="$out/fixture-$(basename "$(dirname "$b")")-$(basename "$b")"
        { cat "$b/metadata/annotations.yaml"; printf '\n@@@\n'
          [ -f "$b/metadata/properties.yaml" ] && cat "$b/metadata/properties.yaml"
          for m in "$b"/manifests/*; do printf '\n@@@\n'; cat "$m"; done; } > "$seed"
      done ;;
    bundle_yaml)
      find "$fixtures/bundles" -path '*/manifests/*' -size -64k -name '*.yaml' | head -40 | while read -r f; do
        cp "$f" "$out/fixture-$(echo "$f" | md5sum | cut -c1-10).yaml"; done ;;
    image_reference)
      grep -rhoE '(image|containerImage): *[^ ]+' "$fixtures" 2>/dev/null | sed -E 's/^[a-zA-Z]+: *//; s/^"//; s/"$//' \
        | sort -u | head -60 | while read -r r; do
          printf '%s' "$r" > "$out/fixture-$(printf '%s' "$r" | md5sum | cut -c1-10)"; done ;;
    version_range)
      grep -rhoE 'olm.skipRange["]?: *["'"'"']?[^"'"'"']+' "$fixtures" 2>/dev/null | sed -E 's/^olm.skipRange"?: *["'"'"']?//' \
        | sort -u | head -40 | while read -r r; do
          printf '%s\n1.0.0\n' "$r" > "$out/fixture-$(printf '%s' "$r" | md5sum | cut -c1-10)"; done ;;
    crd_compare)
      local pairs=(
        "camel-karavan-operator/3.18.5:camel-karavan-operator/3.20.0"
        "camel-karavan-operator/3.20.0:camel-karavan-operator/3.20.1"
        "limitador-operator/0.3.0:limitador-operator/0.4.0"
        "cluster-manager/0.6.0:cluster-manager/0.7.0")
      for p in "${pairs[@]}"; do
        local old="$fixtures/bundles/${p%%:*}/manifests" new="$fixtures/bundles/${p##*:}/manifests"
        [ -d "$old" ] && [ -d "$new" ] || continue
        for crd in $(grep -l 'kind: CustomResourceDefinition' "$old"/* 2>/dev/null); do
          local twin="$new/$(basename "$crd")"
          [ -f "$twin" ] || continue
          { cat "$crd"; printf '\n====\n'; cat "$twin"; } > "$out/fixture-$(echo "$p$crd" | md5sum | cut -c1-10)"
        done
      done ;;
    unpack_layer)
      for b in "$fixtures"/bundles/cockroachdb/*/ "$fixtures"/bundles/file-integrity-console-plugin/*/; do
        [ -d "$b" ] || continue
        local name; name=$(basename "$(dirname "$b")")
        tar -C "$b" -cf "$out/fixture-$name.tar" manifests metadata
        gzip -9 -c "$out/fixture-$name.tar" > "$out/fixture-$name.tar.gz"
      done ;;
  esac
}

# Hostile little layers, made with tar(1) (binary, so generated rather than committed).
layer_seeds() {
  local out=$1 d="$work/layer"
  rm -rf "$d"; mkdir -p "$d/configs/pkg" "$d/other"
  printf '{"schema":"olm.package","name":"pkg"}\n' > "$d/configs/pkg/catalog.json"
  printf 'x' > "$d/other/file"
  ln -s ../other/file "$d/configs/inside-link"
  ln -s ../../../etc/passwd "$d/configs/outside-link"
  ln "$d/other/file" "$d/configs/hardlink"
  : > "$d/other/.wh.file"; : > "$d/configs/.wh..wh..opq"
  tar -C "$d" -cf "$out/layer.tar" configs other
  gzip -9 -c "$out/layer.tar" > "$out/layer.tar.gz"
  if command -v zstd >/dev/null; then zstd -q -c "$out/layer.tar" > "$out/layer.tar.zst"; fi
  tar -C "$d" -cf "$out/dotdot.tar" --transform 's,^other,../escape,' other
  tar -C "$d" -cf "$out/absolute.tar" --transform 's,^other,/abs,' --absolute-names other
}

status=0
printf '\n%-16s %12s %8s %10s  %s\n' target executions seconds 'exec/s' result
for t in "${targets[@]}"; do
  corpus=fuzz/corpus/$t artifacts=fuzz/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  seeds="$work/seeds-$t"; mkdir -p "$seeds"
  cp fuzz/seeds/"$t"/* "$seeds"/ 2>/dev/null || true
  fixture_seeds "$t" "$seeds" || true  # head(1) may cut a pipe short
  [ "$t" = unpack_layer ] && layer_seeds "$seeds"
  log="$work/$t.log"
  args=(-rss_limit_mb=2048 -malloc_limit_mb=1024 -timeout=20 -print_final_stats=1
        -artifact_prefix="$artifacts/")
  if [ $mode = smoke ]; then
    args+=(-runs=0 "$seeds")
  else
    cp -n "$seeds"/* "$corpus"/ 2>/dev/null || true
    args+=(-max_total_time="$seconds" -max_len=262144 "$corpus")
  fi
  begin=$(date +%s.%N)
  if "$bin_dir/$t" "${args[@]}" > "$log" 2>&1; then result=ok; else result=FAILED; status=1; fi
  end=$(date +%s.%N)
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
  [ -n "$execs" ] || execs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
  secs=$(awk -v a="$begin" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  rate=$(awk -v n="${execs:-0}" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
  if [ $result = FAILED ]; then
    artifact=$(grep -o "Test unit written to [^ ]*" "$log" | tail -1 | sed 's/Test unit written to //' || true)
    result="FAILED ${artifact:-(see log below)}"
  fi
  printf '%-16s %12s %8s %10s  %s\n' "$t" "${execs:-?}" "$secs" "$rate" "$result"
  if [ "${result%% *}" = FAILED ]; then
    grep -E 'panicked|ERROR|SUMMARY|timeout|out-of-memory|malloc' "$log" | head -20 | sed 's/^/    /' || true
  fi
done
exit $status
