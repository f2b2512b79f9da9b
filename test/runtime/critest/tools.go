//go:build tools

// Wrapper module that builds critest (cri-tools' CRI validation suite, `go test -c
// sigs.k8s.io/cri-tools/cmd/critest`) for multus-ts' runtime tests (see docs/archive/kubernetes-tests.md). Built by
// test/runtime/build-critest.sh.
package tools

import _ "sigs.k8s.io/cri-tools/cmd/critest"
