module multus-ts/launcher

go 1.24
