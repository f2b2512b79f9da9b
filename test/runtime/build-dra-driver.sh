#!/usr/bin/env bash
# Builds the kubelet tier's DRA driver (test/runtime/dra-driver/main.go: fake NICs carrying Multus' DRA attributes
# in a ResourceSlice, served to kubelet through the kubelet plugin helper of k8s.io/dynamic-resource-allocation)
# in its wrapper module test/runtime/dra-driver (go.mod pins the tests' Kubernetes release, v0.37.2).
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/dra-driver/dra-driver, reused while the inputs (go.mod, go.sum,
# main.go and this script) are unchanged (their hash is kept in build.sha256). Prints timings on stderr and the
# dir on stdout. See docs/archive/kubernetes-tests.md ("DRA under kubelet").
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/dra-driver"
src="$here/dra-driver"

me="runtime/build-dra-driver.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

need_go "the DRA driver"

hash="$(files_hash "$src/go.mod" "$src/go.sum" "$src/main.go" "$here/build-dra-driver.sh")"
begin_build "$out_dir" "$hash" dra-driver
t0="$(now)"
say "go $(go env GOVERSION); building the DRA driver (k8s.io/dynamic-resource-allocation/kubeletplugin)"
(cd "$src" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$tmp/dra-driver" .)
mv -f "$tmp/dra-driver" "$out_dir/dra-driver"
echo "$hash" >"$stamp"
say "built dra-driver in $(secs "$t0" "$(now)") s"
echo "$out_dir"
