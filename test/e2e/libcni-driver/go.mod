module multus-ts/test/e2e/libcni-driver

go 1.21

require github.com/containernetworking/cni v1.3.0
