//go:build tools

// Wrapper module that builds kubelet for multus-ts' runtime tier (see docs/kubernetes-tests.md).
package tools

import _ "k8s.io/kubernetes/cmd/kubelet"
