// Wrapper module that builds critest (sigs.k8s.io/cri-tools/cmd/critest, a Ginkgo test binary) for multus-ts'
// runtime tests; see docs/archive/kubernetes-tests.md. Built by test/runtime/build-critest.sh.
module multus-ts.test/runtime-critest

go 1.26.6

require sigs.k8s.io/cri-tools v1.37.0
