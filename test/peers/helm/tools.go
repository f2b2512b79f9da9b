//go:build tools

// Package tools pins helm's main package (helm.sh/helm/v3/cmd/helm), built by test/peers/build-go-tool.sh helm, so that
// `go mod tidy` keeps its dependencies in go.mod and go.sum.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
