//go:build tools

// Package tools pins the plugin's main package built by test/peers/build-whereabouts.sh so that `go mod tidy`
// keeps its dependencies in go.mod and go.sum.
package tools

import (
	_ "github.com/k8snetworkplumbingwg/whereabouts/cmd"
)
