#!/bin/sh
# Install the Debian `docker-registry` package (distribution 2.8) used by the image
# tests (src/testenv/registry.rs) WITHOUT starting its system service on :5000:
# a deny-all policy-rc.d makes invoke-rc.d skip the start. The tests run their own
# instances on 127.0.0.1:<free port>.
#   usage: hack/registry.sh install   (as root)
#          hack/registry.sh check
set -eu

check() {
    if ! command -v docker-registry >/dev/null 2>&1 && [ ! -x /usr/bin/docker-registry ]; then
        echo "the Debian package docker-registry is not installed: run hack/prereqs.sh test as root (or hack/registry.sh install), which installs it without starting its service" >&2
        exit 1
    fi
    if command -v ss >/dev/null 2>&1 && ss -ltn 2>/dev/null | grep -q ':5000 '; then
        echo "warning: something listens on :5000 (the package's service should not run)" >&2
    fi
    echo "docker-registry: $(command -v docker-registry || echo /usr/bin/docker-registry)"
}

case "${1:-check}" in
install)
    apt-get update
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker-registry
    check
    ;;
check) check ;;
*) echo "usage: $0 install|check" >&2; exit 2 ;;
esac
