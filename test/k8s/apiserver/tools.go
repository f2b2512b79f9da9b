//go:build tools

// Package tools pins the main packages built by test/k8s/build.sh so that `go mod tidy` keeps their
// dependencies in go.mod and go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
