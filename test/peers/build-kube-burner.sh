#!/usr/bin/env bash
# Builds kube-burner v2.7.3 (github.com/kube-burner/kube-burner/v2/cmd/kube-burner), the driver of the density
# bench (`npm run bench -- --scenario density`, scripts/bench/density.mjs), through the wrapper module in
# test/peers/kubeburner (its go.mod pins the version and repeats kube-burner's own replace block).
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/kube-burner/kube-burner, reused while go.mod, go.sum and this
# script are unchanged (their hash is kept beside the binary in build.sha256). Prints timings on stderr and the
# output dir on stdout.
#
# Needs Go (>= 1.25, kube-burner's go directive) and, on the first build, the Go module proxy; later builds work
# offline from the module cache.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/kubeburner"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/kube-burner"
mod=github.com/kube-burner/kube-burner/v2

me="build-kube-burner.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

need_go "kube-burner"

hash="$(files_hash "$src/go.mod" "$src/go.sum" "$here/build-kube-burner.sh")"
begin_build "$out_dir" "$hash" kube-burner

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export CGO_ENABLED=0

t_all="$(now)"
go_mod_download "$src"
version="$(cd "$src" && go list -m -f '{{.Version}}' "$mod")"
# kube-burner's Makefile stamps its version through go-commons' version package; without it `version` is empty.
vpkg=github.com/cloud-bulldozer/go-commons/v2/version
say "building kube-burner ($mod/cmd/kube-burner $version)"
(cd "$src" && go build -trimpath -ldflags="-s -w -X $vpkg.Version=$version" -o "$tmp/kube-burner" "$mod/cmd/kube-burner")
# It must run before it replaces the cached one.
say "$("$tmp/kube-burner" version 2>&1 | tr '\n' ' ')"
mv -f "$tmp/kube-burner" "$out_dir/kube-burner"
echo "$hash" >"$stamp"
say "total $(secs "$t_all" "$(now)") s"
echo "$out_dir"
