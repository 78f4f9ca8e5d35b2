#!/usr/bin/env bash
# Prints the etcd binary that the etcd-bin-vendored crate ships: found in the crate's
# package directory through `cargo metadata` (no compilation); when that fails, by
# building the tiny example that asks the crate for it.
set -euo pipefail
cd "$(dirname "$0")/.."
manifest=$(cargo metadata --quiet --format-version 1 --locked 2>/dev/null \
  | grep -o '"manifest_path":"[^"]*/etcd-bin-vendored-linux-amd64-[^"/]*/Cargo.toml"' \
  | head -n1 | sed -E 's/^"manifest_path":"(.*)\/Cargo.toml"$/\1/') || true
if [ -n "${manifest:-}" ] && [ -x "$manifest/bin/etcd" ]; then
  echo "$manifest/bin/etcd"
else
  cargo run --quiet --example etcd_path
fi
