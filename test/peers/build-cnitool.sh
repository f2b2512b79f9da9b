#!/usr/bin/env bash
# Builds cnitool v1.3.0 (github.com/containernetworking/cni/cnitool, the CNI project's own client) through the
# wrapper module in test/peers/cnitool. test/e2e/cnitool.test.ts drives build/multus with it (add, check, status,
# gc, del) over real plugins in a network namespace.
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/cnitool/cnitool, reused while go.mod, go.sum and this script are
# unchanged (their hash is kept beside the binary in build.sha256). Prints timings on stderr and the output dir on
# stdout.
#
# Needs Go and, on the first build, the Go module proxy; later builds work offline from the module cache.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/cnitool"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/cnitool"
mod=github.com/containernetworking/cni

me="build-cnitool.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

need_go "cnitool"

hash="$(files_hash "$src/go.mod" "$src/go.sum" "$here/build-cnitool.sh")"
begin_build "$out_dir" "$hash" cnitool

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export CGO_ENABLED=0

t_all="$(now)"
go_mod_download "$src"
version="$(cd "$src" && go list -m -f '{{.Version}}' "$mod")"
say "building cnitool ($mod/cnitool $version)"
(cd "$src" && go build -trimpath -ldflags="-s -w" -o "$tmp/cnitool" "$mod/cnitool")
# cnitool has no version command; without arguments it prints its usage (and exits 1).
usage="$("$tmp/cnitool" 2>&1 || true)"
[[ "$usage" == *"cnitool add"* ]] || { say "the built cnitool does not run: $usage"; exit 1; }
echo "$version" >"$tmp/version"
mv -f "$tmp/version" "$out_dir/version"
mv -f "$tmp/cnitool" "$out_dir/cnitool"
echo "$hash" >"$stamp"
say "total $(secs "$t_all" "$(now)") s"
echo "$out_dir"
