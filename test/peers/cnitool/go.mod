// Wrapper module that builds cnitool v1.3.0, the CNI project's reference client (test/e2e/cnitool.test.ts drives
// build/multus with it). Built by test/peers/build-go-tool.sh cnitool.
module multus-ts.test/cnitool

go 1.21

require github.com/containernetworking/cni v1.3.0
