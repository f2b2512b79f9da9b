//go:build tools

// Wrapper module that builds kubelet and the two control-plane components a DaemonSet needs besides the API
// server (the DaemonSet controller in kube-controller-manager, and kube-scheduler) for multus-ts' runtime tier
// (see docs/archive/kubernetes-tests.md, "kubelet").
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
