#!/usr/bin/env bash
# Builds the test node's programs with Go and caches them beside the control plane's
# (hack/build-kube.sh): kubelet, kube-scheduler, kube-proxy and kubectl from the same
# k8s.io/kubernetes module (hack/kube), CoreDNS from its module (hack/coredns), and the
# node's one test program (hack/testimage: the pod sandbox and a tiny workload). Also
# installs, when missing, Debian's containerd, runc, CNI plugins and iptables.
# A second run finds everything cached and returns at once.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=v1.37.1
MINOR=37
BIN_DIR="${OLMV1_KUBE_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/olmv1/kube/$VERSION}"
mkdir -p "$BIN_DIR"

missing=()
for pkg_bin in containerd:/usr/bin/containerd runc:/usr/sbin/runc \
               containernetworking-plugins:/usr/lib/cni/bridge iptables:/usr/sbin/iptables; do
  [ -e "${pkg_bin#*:}" ] || missing+=("${pkg_bin%%:*}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages for the test node: ${missing[*]}"
  # Keep packaged services from starting: the node starts its own containerd.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The node's test program is tiny: always rebuilt (Go's cache makes it instant), so
# that a change to it reaches the images.
(cd hack/testimage && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -buildid=" -o "$BIN_DIR/testimage" .)
command -v go >/dev/null || { echo "error: Go is needed to build the node's programs" >&2; exit 1; }
have() { [ -x "$BIN_DIR/$1" ]; }
if have kubelet && have kube-scheduler && have kube-proxy && have kubectl && have coredns \
   && "$BIN_DIR/kubelet" --version 2>/dev/null | grep -qx "Kubernetes $VERSION"; then
  echo "node binaries $VERSION: cached in $BIN_DIR"
  exit 0
fi
tmp=$(mktemp -d "$BIN_DIR/.build-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean"
start=$(date +%s)
echo "building kubelet, kube-scheduler, kube-proxy and kubectl $VERSION (first run only: about 10 minutes on 2 cores)..."
if ! (cd hack/kube && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl) >"$tmp/build.log" 2>&1; then
  echo "error: building the node's Kubernetes programs failed; last lines:" >&2; tail -20 "$tmp/build.log" >&2; exit 1
fi
echo "building CoreDNS (first run only: a few minutes)..."
if ! (cd hack/coredns && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" github.com/coredns/coredns) >"$tmp/coredns.log" 2>&1; then
  echo "error: building CoreDNS failed; last lines:" >&2; tail -20 "$tmp/coredns.log" >&2; exit 1
fi
mv "$tmp"/kubelet "$tmp"/kube-scheduler "$tmp"/kube-proxy "$tmp"/kubectl "$tmp"/coredns "$BIN_DIR/"
echo "node binaries $VERSION: built into $BIN_DIR in $(( $(date +%s) - start )) s"
