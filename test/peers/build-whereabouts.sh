#!/usr/bin/env bash
# Builds whereabouts v0.9.2 as a peer for multus-ts' tests: the IPAM plugin (package
# github.com/k8snetworkplumbingwg/whereabouts/cmd, installed as `whereabouts`) and whereabouts-reconcile
# (test/peers/whereabouts/reconcile: whereabouts' IP reconciler run once with a kubeconfig), through the
# wrapper module in test/peers/whereabouts (its go.mod pins the version), and copies whereabouts' CRDs
# (doc/crds/whereabouts.cni.cncf.io_*.yaml of the module) beside them.
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/whereabouts/{whereabouts,whereabouts-reconcile,crds/*.yaml},
# reused while the wrapper module's files and this script are unchanged (their hash is kept in build.sha256).
# Prints timings on stderr and the output dir on stdout. Needs Go and, on the first build, the module proxy.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/whereabouts"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/whereabouts"
mod=github.com/k8snetworkplumbingwg/whereabouts

me="build-whereabouts.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

need_go "whereabouts"

hash="$(files_hash "$src/go.mod" "$src/go.sum" "$src/tools.go" "$src/reconcile/main.go" "$here/build-whereabouts.sh")"
begin_build "$out_dir" "$hash" whereabouts whereabouts-reconcile

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export CGO_ENABLED=0

t_all="$(now)"
go_mod_download "$src"
version="$(cd "$src" && go list -m -f '{{.Version}}' "$mod")"
moddir="$(cd "$src" && go list -m -f '{{.Dir}}' "$mod")"
# whereabouts' own build (hack/build-go.sh) stamps the version with -X; without it the plugin's version is empty.
ldflags="-s -w -X $mod/pkg/version.Version=$version -X $mod/pkg/version.ReleaseStatus=released"
t0="$(now)"
(cd "$src" && go build -trimpath -ldflags="$ldflags" -o "$tmp/whereabouts" "$mod/cmd")
say "built whereabouts ($mod/cmd $version) in $(secs "$t0" "$(now)") s"
t0="$(now)"
(cd "$src" && go build -trimpath -ldflags="-s -w" -o "$tmp/whereabouts-reconcile" ./reconcile)
say "built whereabouts-reconcile in $(secs "$t0" "$(now)") s"
mkdir -p "$tmp/crds"
cp "$moddir"/doc/crds/whereabouts.cni.cncf.io_*.yaml "$tmp/crds/"
chmod 0644 "$tmp"/crds/*.yaml
# The plugin must answer VERSION before it replaces the cached one.
say "VERSION: $(echo '{"cniVersion":"1.0.0"}' | CNI_COMMAND=VERSION "$tmp/whereabouts" 2>&1 | head -c 200)"
rm -rf "$out_dir/crds"
mv -f "$tmp/whereabouts" "$tmp/whereabouts-reconcile" "$out_dir/"
mv "$tmp/crds" "$out_dir/crds"
echo "$hash" >"$stamp"
say "total $(secs "$t_all" "$(now)") s"
echo "$out_dir"
