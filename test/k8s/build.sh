#!/usr/bin/env bash
# Builds the real kube-apiserver and etcd used by the Kubernetes tests (test/k8s/cluster.ts) from Go modules:
# k8s.io/kubernetes/cmd/kube-apiserver and go.etcd.io/etcd/server/v3, through the wrapper module in
# test/k8s/apiserver (its go.mod pins the versions and maps the k8s.io/* staging modules to their published
# releases). See docs/archive/kubernetes-tests.md.
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/k8s/{kube-apiserver,etcd}, reused while go.mod, go.sum and this
# script are unchanged (their hash is kept beside the binaries in build.sha256). Also makes sure openssl is
# installed (cluster.ts generates certificates with it). Prints timings on stderr and the cache dir on stdout.
#
# Needs Go (>= 1.24) and, on the first build, the Go module proxy; later builds work offline from the module
# cache, and a rebuild after a go.mod change is quick while Go's build cache (~/.cache/go-build) is warm.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/apiserver"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/k8s"

me="k8s/build.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

# openssl: cluster.ts makes the CA, serving and client certificates with it.
need_packages openssl

need_go "kube-apiserver and etcd"

hash="$(files_hash "$src/go.mod" "$src/go.sum" "$here/build.sh")"
begin_build "$out_dir" "$hash" kube-apiserver etcd

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export CGO_ENABLED=0
build() { # name package [ldflags...]
  local t0 name="$1" pkg="$2"
  shift 2
  t0="$(now)"
  say "building $name ($pkg)"
  (cd "$src" && go build -trimpath -ldflags="-s -w $*" -o "$tmp/$name" "$pkg")
  say "built $name in $(secs "$t0" "$(now)") s"
}

t_all="$(now)"
go_mod_download "$src"
build etcd go.etcd.io/etcd/server/v3
# Without -X the binary says it is v0.0.0-master (GET /version, the User-Agent of its loopback clients): stamp the
# pinned release the way Kubernetes' own build (hack/lib/version.sh) does.
kver="$(cd "$src" && go list -m -f '{{.Version}}' k8s.io/kubernetes)"
kminor="${kver#v1.}"
kminor="${kminor%%.*}"
vflags=()
for vpkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  vflags+=("-X $vpkg.gitVersion=$kver -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$kminor -X $vpkg.gitTreeState=clean")
done
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "${vflags[@]}"
# Both must run (and say what they are) before they replace the cached ones.
etcd_version="$("$tmp/etcd" --version)"
apiserver_version="$("$tmp/kube-apiserver" --version)"
say "${etcd_version%%$'\n'*}; $apiserver_version"
mv -f "$tmp/etcd" "$out_dir/etcd"
mv -f "$tmp/kube-apiserver" "$out_dir/kube-apiserver"
echo "$hash" >"$stamp"
say "total $(secs "$t_all" "$(now)") s"
echo "$out_dir"
