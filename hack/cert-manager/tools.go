//go:build tools

// Package tools pins the cert-manager module that hack/build-cert-manager.sh builds
// the test environment's cert-manager controller and cainjector from (see
// controller/ and cainjector/), and whose deploy/crds it copies.
package tools

import _ "github.com/cert-manager/cert-manager/pkg/controller"
