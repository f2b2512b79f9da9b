//go:build tools

// Wrapper module that builds CRI-O (github.com/cri-o/cri-o/cmd/crio) for multus-ts' runtime tests (see
// docs/archive/kubernetes-tests.md). Built by test/runtime/build-crio.sh.
package tools

import _ "github.com/cri-o/cri-o/cmd/crio"
