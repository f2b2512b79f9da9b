#!/usr/bin/env bash
# Builds Go Multus v4.3.0 as a peer for multus-ts' tests and benchmarks: the thin plugin (cmd/multus), the thick
# plugin's shim and daemon (cmd/multus-shim, cmd/multus-daemon), cmd/thin_entrypoint, cmd/install_multus and the
# passthru plugin (cmd/passthru-cni, named passthru as Multus' hack/build-go.sh names it), through the wrapper
# module in test/peers/gomultus (its go.mod pins gopkg.in/k8snetworkplumbingwg/multus-cni.v4).
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/gomultus/{multus,multus-shim,multus-daemon,thin_entrypoint,
# install_multus,passthru},
# reused while go.mod, go.sum and this script are unchanged (their hash is kept beside the binaries in
# build.sha256). Prints timings on stderr and the output dir on stdout.
#
# Needs Go (>= 1.25, multus-cni v4.3.0's go directive) and, on the first build, the Go module proxy; later
# builds work offline from the module cache.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/gomultus"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/gomultus"
bins=(multus multus-shim multus-daemon thin_entrypoint install_multus passthru)

me="build-gomultus.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

need_go "Go Multus"

hash="$(files_hash "$src/go.mod" "$src/go.sum" "$here/build-gomultus.sh")"
begin_build "$out_dir" "$hash" "${bins[@]}"

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export CGO_ENABLED=0
mod=gopkg.in/k8snetworkplumbingwg/multus-cni.v4

t_all="$(now)"
go_mod_download "$src"
version="$(cd "$src" && go list -m -f '{{.Version}}' "$mod")"
# Multus' own build (hack/build-go.sh) stamps the version with -X; without it `multus -v` says "master".
ldflags="-s -w -X $mod/pkg/multus.version=$version"
for b in "${bins[@]}"; do
  t0="$(now)"
  pkg="$mod/cmd/$b"
  [[ "$b" == passthru ]] && pkg="$mod/cmd/passthru-cni"
  say "building $b ($pkg)"
  (cd "$src" && go build -trimpath -ldflags="$ldflags" -o "$tmp/$b" "$pkg")
  say "built $b in $(secs "$t0" "$(now)") s"
done
# The plugin and the shim must run (and say what they are) before they replace the cached ones.
say "$("$tmp/multus" -version 2>&1 | head -n1); $("$tmp/multus-shim" -version 2>&1 | head -n1)"
for b in "${bins[@]}"; do mv -f "$tmp/$b" "$out_dir/$b"; done
echo "$hash" >"$stamp"
say "total $(secs "$t_all" "$(now)") s"
echo "$out_dir"
