#!/usr/bin/env bash
# Builds helm v3.22.0 (helm.sh/helm/v3/cmd/helm) through the wrapper module in test/peers/helm, with the ldflags of
# helm's Makefile (version, and the Kubernetes version `helm lint` and `helm template` default to, from the
# client-go helm builds with). test/install/helm-chart.test.ts lints and renders deployments/helm/multus with it;
# the runtime tier's kubelet suite installs and uninstalls the chart.
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/helm/helm, reused while go.mod, go.sum and this script are unchanged
# (their hash is kept beside the binary in build.sha256). Prints timings on stderr and the output dir on stdout.
#
# Needs Go (>= 1.26, helm's go directive) and, on the first build, the Go module proxy; later builds work offline
# from the module cache.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/helm"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/helm"
mod=helm.sh/helm/v3

me="build-helm.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

need_go "helm"

hash="$(files_hash "$src/go.mod" "$src/go.sum" "$here/build-helm.sh")"
begin_build "$out_dir" "$hash" helm

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export CGO_ENABLED=0

t_all="$(now)"
go_mod_download "$src"
version="$(cd "$src" && go list -m -f '{{.Version}}' "$mod")"
client_go="$(cd "$src" && go list -m -f '{{.Version}}' k8s.io/client-go)" # v0.35.1 -> Kubernetes 1.35
k8s_minor="$(echo "$client_go" | cut -d. -f2)"
k8s_major=$(($(echo "${client_go#v}" | cut -d. -f1) + 1))
ld="-s -w -X $mod/internal/version.version=$version -X $mod/internal/version.metadata="
for p in pkg/lint/rules pkg/chartutil; do
  ld="$ld -X $mod/$p.k8sVersionMajor=$k8s_major -X $mod/$p.k8sVersionMinor=$k8s_minor"
done
say "building helm ($mod/cmd/helm $version, client-go $client_go)"
(cd "$src" && go build -trimpath -ldflags="$ld" -o "$tmp/helm" "$mod/cmd/helm")
# It must run before it replaces the cached one.
say "$(HOME="$tmp" "$tmp/helm" version --short 2>&1)"
mv -f "$tmp/helm" "$out_dir/helm"
echo "$hash" >"$stamp"
say "total $(secs "$t_all" "$(now)") s"
echo "$out_dir"
