#!/usr/bin/env bash
# What the README's two commands need besides the source tree, checked in the first
# seconds, before any long build, and installed where it can be:
#   hack/prereqs.sh demo           what hack/demo.sh needs (a real node: root, containerd,
#                                  runc, CNI plugins, iptables, a registry, strip)
#   hack/prereqs.sh demo-no-node   what hack/demo.sh --no-node needs (no root)
#   hack/prereqs.sh test           what hack/test.sh needs (all of the above, openssl,
#                                  clippy, rustfmt, cargo-deny)
#   --check                        install nothing: report what is missing, with the
#                                  command that fixes it, and exit 1
# Rust (the toolchain pinned in rust-toolchain.toml) and Go (>= the `go` line of
# hack/kube/go.mod) cannot be installed from here: their absence is reported with the
# fix. Debian packages are installed with apt-get as root, at most once, with packaged
# services kept from starting (the tests run their own registry and containerd);
# cargo-deny with `cargo install`. Each install prints one line: what and why.
# OLMV1_PREREQS_CARGO_DENY=later leaves cargo-deny out (hack/test.sh installs it with the
# other long builds, in the background, by a second run of this script).
# OLMV1_POLICY_RC_D (default /usr/sbin/policy-rc.d) is where the deny-all policy goes
# while apt-get runs (tests/prereqs.rs points it elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"
check_only=0
for arg in "${@:2}"; do
  case "$arg" in
    --check) check_only=1 ;;
    *) mode=usage ;;
  esac
done
case "$mode" in
  demo | demo-no-node | test) ;;
  *) echo "usage: $0 demo|demo-no-node|test [--check]" >&2; exit 2 ;;
esac

deny_version=0.20.2
policy_rc_d="${OLMV1_POLICY_RC_D:-/usr/sbin/policy-rc.d}"
problems=()
problem() { problems+=("$1"); }

# --- Rust: the pinned toolchain, never downloaded (RUSTUP_AUTO_INSTALL=0).
channel=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
export RUSTUP_AUTO_INSTALL=0
if ! command -v cargo >/dev/null 2>&1 || ! command -v rustc >/dev/null 2>&1; then
  problem "Rust is not installed (no cargo/rustc on PATH): install the toolchain $channel with rustup (rustup toolchain install $channel --component clippy,rustfmt) and put ~/.cargo/bin on PATH"
else
  rustc_version=$(rustc --version 2>&1 || true)
  case "$rustc_version" in
    "rustc $channel "*) ;;
    *) problem "Rust $channel is needed (rust-toolchain.toml), but rustc says: ${rustc_version:-nothing}. Fix: rustup toolchain install $channel --component clippy,rustfmt" ;;
  esac
  if [ "$mode" = test ]; then
    for sub_component in clippy:clippy fmt:rustfmt; do
      if ! cargo "${sub_component%%:*}" --version >/dev/null 2>&1; then
        problem "the Rust component ${sub_component#*:} is missing: rustup component add ${sub_component#*:} --toolchain $channel"
      fi
    done
  fi
fi

# --- Go: builds the test infrastructure under hack/ (Kubernetes, CoreDNS, cert-manager).
go_min=$(awk '$1 == "go" {print $2; exit}' hack/kube/go.mod)
if ! command -v go >/dev/null 2>&1; then
  problem "Go is not installed (no go on PATH): install Go >= $go_min (e.g. from go.dev/dl, or apt-get install golang-go where it is that new) and put it on PATH; it builds Kubernetes and the other test infrastructure once"
else
  go_version=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
  if [ -z "$go_version" ] || [ "$(printf '%s\n%s\n' "$go_min" "$go_version" | sort -V | head -n1)" != "$go_min" ]; then
    problem "Go >= $go_min is needed (hack/kube/go.mod), but go reports ${go_version:-no version}: install a newer Go"
  fi
fi

# --- Debian packages: "package|command or absolute path|why".
packages=()
case "$mode" in
  demo-no-node)
    packages=("docker-registry|docker-registry|the OCI registry the demo publishes its catalog to"
              "curl|curl|the demo's readiness check of the local controller") ;;
  demo | test)
    packages=("docker-registry|docker-registry|the OCI registry of the node and the image tests"
              "containerd|containerd|the node's container runtime"
              "runc|runc|the node's OCI runtime"
              "containernetworking-plugins|/usr/lib/cni/bridge|the node's pod network, the CNI bridge"
              "iptables|iptables|the node's Service routing (kube-proxy)"
              "iproute2|ip|the node's pod network setup"
              "procps|pgrep|finding a node left running"
              "binutils|strip|stripping olmv1 for its image")
    if [ "$mode" = test ]; then
      packages+=("openssl|openssl|the certificates of the TLS and auth test registries")
    fi ;;
esac
missing=()
why=()
for entry in "${packages[@]}"; do
  IFS='|' read -r pkg probe reason <<<"$entry"
  case "$probe" in
    /*) [ -e "$probe" ] && continue ;;
    *) command -v "$probe" >/dev/null 2>&1 && continue ;;
  esac
  missing+=("$pkg")
  why+=("$pkg — $reason")
done

is_root=0
[ "$(id -u)" = 0 ] && is_root=1
if [ "$mode" != demo-no-node ] && [ "$is_root" = 0 ]; then
  problem "root is needed: the node runs containers (containerd, the pod network). Run it as root, or hack/demo.sh --no-node for a demo without a node"
fi

install_cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]:-}"
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$check_only" = 1 ] || [ "$is_root" = 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    fix="$install_cmd"
    [ "$is_root" = 0 ] && fix="sudo sh -c '$install_cmd'"
    command -v apt-get >/dev/null 2>&1 || fix="install the equivalent of the Debian packages ${missing[*]} with this system's package manager"
    problem "missing Debian packages: $(IFS=';'; echo "${why[*]}" | sed 's/;/; /g'). Fix: $fix (with a deny-all /usr/sbin/policy-rc.d while it runs, so that no packaged service starts)"
    missing=()
  fi
fi

if [ ${#problems[@]} -gt 0 ]; then
  echo "error: this machine lacks what hack/${mode%%-*}.sh needs:" >&2
  for p in "${problems[@]}"; do echo "  - $p" >&2; done
  exit 1
fi

# --- Installs (as root, with apt-get): one line each, services kept from starting.
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages, once: $(IFS=';'; echo "${why[*]}" | sed 's/;/; /g')"
  made_policy=0
  if [ ! -e "$policy_rc_d" ]; then
    printf '#!/bin/sh\n# hack/prereqs.sh: no packaged service starts while it installs\nexit 101\n' >"$policy_rc_d"
    chmod +x "$policy_rc_d"
    made_policy=1
  fi
  log=$(mktemp)
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    [ "$made_policy" = 1 ] && rm -f "$policy_rc_d"
    echo "error: installing ${missing[*]} with apt-get failed; last lines:" >&2
    tail -15 "$log" >&2
    rm -f "$log"
    exit 1
  fi
  [ "$made_policy" = 1 ] && rm -f "$policy_rc_d"
  rm -f "$log"
  for entry in "${packages[@]}"; do
    IFS='|' read -r pkg probe _ <<<"$entry"
    case "$probe" in
      /*) [ -e "$probe" ] && continue ;;
      *) command -v "$probe" >/dev/null 2>&1 && continue ;;
    esac
    echo "error: the Debian package $pkg was installed, but $probe is still not there" >&2
    exit 1
  done
fi

if [ "$mode" = test ] && [ "${OLMV1_PREREQS_CARGO_DENY:-}" != later ] && ! command -v cargo-deny >/dev/null 2>&1; then
  if [ "$check_only" = 1 ]; then
    echo "error: cargo-deny is missing (it checks licenses, bans and sources: deny.toml). Fix: cargo install --locked cargo-deny@$deny_version" >&2
    exit 1
  fi
  echo "installing cargo-deny $deny_version from crates.io, once (checks licenses, bans and sources: deny.toml; about 5 minutes on 2 cores)"
  start=$(date +%s)
  log=$(mktemp)
  if ! cargo install --quiet --locked "cargo-deny@$deny_version" >"$log" 2>&1; then
    echo "error: cargo install --locked cargo-deny@$deny_version failed; last lines:" >&2
    tail -15 "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
  echo "   cargo-deny installed in $(( $(date +%s) - start ))s"
fi
