//go:build tools

// Package tools pins CoreDNS, built by hack/node.sh for the test node's cluster DNS.
package tools

import _ "github.com/coredns/coredns"
