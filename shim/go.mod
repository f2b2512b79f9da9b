module multus-ts/shim

go 1.24
