//go:build tools

// Wrapper module that builds crictl for multus-ts' runtime tests (see docs/archive/kubernetes-tests.md). Built by
// test/runtime/build.sh.
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
