//go:build tools

// Package tools pins kwok's main package, built by test/peers/build-kwok.sh, so that `go mod tidy` keeps its
// dependencies in go.mod and go.sum.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
