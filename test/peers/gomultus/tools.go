//go:build tools

// Package tools pins the main packages built by test/peers/build-gomultus.sh so that `go mod tidy` keeps their
// dependencies in go.mod and go.sum.
package tools

import (
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/install_multus"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus-daemon"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus-shim"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/passthru-cni"
	_ "gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/thin_entrypoint"
)
