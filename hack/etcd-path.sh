#!/usr/bin/env bash
# Prints the etcd binary that the etcd-bin-vendored crate ships (building the tiny
# example that asks the crate for it).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --example etcd_path
