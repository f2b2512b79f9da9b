#!/usr/bin/env bash
# Builds one of the Go tools the tests drive, each through its wrapper module in test/peers/<tool>:
#   cnitool  cnitool v1.3.0 (github.com/containernetworking/cni/cnitool, the CNI project's own client):
#            test/e2e/cnitool.test.ts runs build/multus with it;
#   helm     helm v3.22.0 (helm.sh/helm/v3/cmd/helm) with the ldflags of helm's Makefile (its version, and the
#            Kubernetes version `helm lint` and `helm template` default to, from the client-go it builds with):
#            test/install/helm-chart.test.ts lints and renders deployments/helm/multus, and
#            test/runtime/kubelet-helm.test.ts installs and uninstalls it.
#
# Usage: bash test/peers/build-go-tool.sh cnitool|helm
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/<tool>/<tool>, reused while the wrapper's go.mod and go.sum and this
# script are unchanged (their hash is kept beside the binary in build.sha256). Prints timings on stderr and the
# output dir on stdout. Needs Go (helm: >= 1.26, its go directive) and, on the first build, the Go module proxy;
# later builds work offline from the module cache.
set -euo pipefail

tool="${1:-}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/$tool"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"

me="build-go-tool.sh $tool"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

case "$tool" in
  cnitool) mod=github.com/containernetworking/cni pkg=cnitool ;;
  helm) mod=helm.sh/helm/v3 pkg=cmd/helm ;;
  *)
    say "usage: bash test/peers/build-go-tool.sh cnitool|helm"
    exit 2
    ;;
esac
need_go "$tool"

hash="$(files_hash "$src/go.mod" "$src/go.sum" "$here/build-go-tool.sh")"
begin_build "$cache/$tool" "$hash" "$tool"

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export CGO_ENABLED=0

t_all="$(now)"
go_mod_download "$src"
version="$(cd "$src" && go list -m -f '{{.Version}}' "$mod")"
ld="-s -w"
if [[ "$tool" == helm ]]; then
  client_go="$(cd "$src" && go list -m -f '{{.Version}}' k8s.io/client-go)" # v0.37.0 -> Kubernetes 1.37
  k8s_minor="$(echo "$client_go" | cut -d. -f2)"
  k8s_major=$(($(echo "${client_go#v}" | cut -d. -f1) + 1))
  ld="$ld -X $mod/internal/version.version=$version -X $mod/internal/version.metadata="
  for p in pkg/lint/rules pkg/chartutil; do
    ld="$ld -X $mod/$p.k8sVersionMajor=$k8s_major -X $mod/$p.k8sVersionMinor=$k8s_minor"
  done
fi
say "building $tool ($mod/$pkg $version)"
(cd "$src" && go build -trimpath -ldflags="$ld" -o "$tmp/$tool" "$mod/$pkg")
# It must run before it replaces the cached one (cnitool has no version command: its usage, exit 1).
if [[ "$tool" == helm ]]; then
  say "$(HOME="$tmp" "$tmp/helm" version --short 2>&1)"
else
  usage="$("$tmp/cnitool" 2>&1 || true)"
  [[ "$usage" == *"cnitool add"* ]] || { say "the built cnitool does not run: $usage"; exit 1; }
fi
mv -f "$tmp/$tool" "$cache/$tool/$tool"
echo "$hash" >"$stamp"
say "total $(secs "$t_all" "$(now)") s"
echo "$cache/$tool"
