//go:build tools

// Package tools pins kube-burner's main package, built by test/peers/build-kube-burner.sh, so that `go mod tidy`
// keeps its dependencies in go.mod and go.sum.
package tools

import (
	_ "github.com/kube-burner/kube-burner/v2/cmd/kube-burner"
)
