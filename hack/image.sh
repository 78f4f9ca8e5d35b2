#!/usr/bin/env bash
# Builds the controller's OCI image without a container engine: the release `olmv1`
# binary, the shared libraries it links (glibc), the CA bundle, a non-root user
# (65532), no shell. Reproducible: the same binary and host libraries give the same
# digest (timestamps come from SOURCE_DATE_EPOCH, default: the last commit's time).
#   hack/image.sh --push 127.0.0.1:5000/olmv1:dev [--insecure]
#   hack/image.sh --oci-archive olmv1.oci.tar
#   hack/image.sh --debug ...    # package target/debug/olmv1 (faster to build; tests)
#   hack/image.sh --push REF --release-manifest olmv1.yaml   # also write the release
#       manifest (dist/olmv1.yaml's content) with the image pinned to the pushed digest
# Prints the digest-pinned reference (or the manifest digest).
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
args=()
release_manifest=
while [ $# -gt 0 ]; do
  case "$1" in
    --debug) profile=debug ;;
    --release-manifest) shift; release_manifest="${1:?--release-manifest needs a file}" ;;
    *) args+=("$1") ;;
  esac
  shift
done
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
target="${CARGO_TARGET_DIR:-target}"
if [ "$profile" = release ]; then
  echo "building olmv1 (release; the first build takes 10-15 minutes on 2 cores)..." >&2
  cargo build --quiet --release --locked --bin olmv1
else
  cargo build --quiet --bin olmv1
fi
[ -n "${OLMV1_TESTENV_BIN:-}" ] || cargo build --quiet --features testenv --bin olmv1-testenv
testenv="${OLMV1_TESTENV_BIN:-$target/debug/olmv1-testenv}"
# Debug symbols do not belong in the image (and would make it 5x larger).
stripped=$(mktemp -d)
trap 'rm -rf "$stripped"' EXIT
strip -o "$stripped/olmv1" "$target/$profile/olmv1"
# /operator-controller and /catalogd: links to /olmv1, which runs as upstream's program
# of that name (docs/how-to/switch-from-upstream.md).
ref=$("$testenv" image --program "$stripped/olmv1" --name olmv1 --cmd controller \
  --link operator-controller --link catalogd \
  --label org.opencontainers.image.source=https://github.com/olmv1-rs/olmv1 \
  --label org.opencontainers.image.revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)" \
  "${args[@]}")
echo "$ref"
if [ -n "$release_manifest" ]; then
  case "$ref" in
    *@sha256:*) "$testenv" release --image "$ref" -o "$release_manifest"
                echo "release manifest with $ref: $release_manifest" >&2 ;;
    *) echo "error: --release-manifest needs --push (the manifest pins the pushed image by digest)" >&2; exit 1 ;;
  esac
fi
