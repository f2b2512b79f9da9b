//go:build tools

// Package tools pins the CNI project's own client, cnitool (github.com/containernetworking/cni/cnitool, a
// package of the github.com/containernetworking/cni module), built by test/peers/build-go-tool.sh cnitool, so that
// `go mod tidy` keeps its dependencies in go.mod and go.sum.
package tools

import (
	_ "github.com/containernetworking/cni/cnitool"
)
