#!/usr/bin/env bash
# Builds what the runtime tests (test/runtime/runtime.ts) need besides Debian's containerd and runc:
#  - crictl, from Go modules through the wrapper module in test/runtime/crictl (its go.mod pins
#    sigs.k8s.io/cri-tools);
#  - the sandbox ("pause") image, made offline: a static pause (pause.c, gcc -static) packed by umoci into
#    an OCI image layout and tarred as an OCI archive for `ctr images import`.
# See docs/archive/kubernetes-tests.md.
#
# With --kubelet it also builds kubelet, kube-controller-manager and kube-scheduler (k8s.io/kubernetes/cmd/...,
# wrapper module test/runtime/kubelet) into the same dir, with their own stamp kubelet.sha256, for
# test/runtime/kubelet.test.ts; scripts/setup.sh asks for them.
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/runtime/{crictl,pause.tar}, reused while the inputs (go.mod,
# go.sum, pause.c and this script) are unchanged (their hash is kept in build.sha256). Installs containerd,
# runc, umoci and gcc with apt-get when missing (as root). Prints timings on stderr and the dir on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/runtime"
# The name the image is imported under; runtime.ts points containerd's sandbox_image at it.
image_tag="3.10-multus-ts"

with_kubelet=false
[[ "${1:-}" == "--kubelet" ]] && with_kubelet=true

me="runtime/build.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

need_packages containerd runc umoci gcc libc6-dev

need_go "crictl"

# kubelet and the control plane's DaemonSet controller and scheduler (only with --kubelet): stamped with their
# release like kube-apiserver in test/k8s/build.sh; one `go build` so the shared packages compile once
node_bins=(kubelet kube-controller-manager kube-scheduler)
build_kubelet() {
  local khash kver kminor vflags=() t0 ktmp b ok=true pkgs=()
  khash="$(cat "$here/kubelet/go.mod" "$here/kubelet/go.sum" "$here/build.sh" | sha256sum | cut -d' ' -f1)"
  for b in "${node_bins[@]}"; do [[ -x "$out_dir/$b" ]] || ok=false; done
  if $ok && [[ -f "$out_dir/kubelet.sha256" && "$(cat "$out_dir/kubelet.sha256")" == "$khash" ]]; then
    say "$out_dir/{${node_bins[*]}} are up to date"
    return 0
  fi
  mkdir -p "$out_dir"
  ktmp="$(mktemp -d "$out_dir/.kubelet.XXXXXX")"
  kver="$(cd "$here/kubelet" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' k8s.io/kubernetes)"
  kminor="${kver#v1.}"
  kminor="${kminor%%.*}"
  for vpkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    vflags+=("-X $vpkg.gitVersion=$kver -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$kminor -X $vpkg.gitTreeState=clean")
  done
  for b in "${node_bins[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
  t0="$(now)"
  say "building ${node_bins[*]} ($kver)"
  (cd "$here/kubelet" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags="-s -w ${vflags[*]}" \
    -o "$ktmp/" "${pkgs[@]}") || { rm -rf "$ktmp"; return 1; }
  say "built them in $(secs "$t0" "$(now)") s: $("$ktmp/kubelet" --version)"
  for b in "${node_bins[@]}"; do mv -f "$ktmp/$b" "$out_dir/$b"; done
  rm -rf "$ktmp"
  echo "$khash" >"$out_dir/kubelet.sha256"
}
if $with_kubelet; then
  build_kubelet
fi

hash="$(files_hash "$here/crictl/go.mod" "$here/crictl/go.sum" "$here/pause.c" "$here/build.sh")"
begin_build "$out_dir" "$hash" crictl pause.tar
t_all="$(now)"

# crictl
t0="$(now)"
say "go $(go env GOVERSION); building crictl (sigs.k8s.io/cri-tools/cmd/crictl)"
cver="$(cd "$here/crictl" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' sigs.k8s.io/cri-tools)"
(cd "$here/crictl" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath \
  -ldflags="-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$cver" -o "$tmp/crictl" sigs.k8s.io/cri-tools/cmd/crictl)
say "built crictl in $(secs "$t0" "$(now)") s: $("$tmp/crictl" --version)"

# the pause image
t0="$(now)"
gcc -static -Os -s -o "$tmp/pause" "$here/pause.c"
layout="$tmp/layout"
umoci init --layout "$layout"
umoci new --image "$layout:$image_tag"
umoci unpack --image "$layout:$image_tag" "$tmp/bundle" >/dev/null
install -m 0755 "$tmp/pause" "$tmp/bundle/rootfs/pause"
umoci repack --image "$layout:$image_tag" "$tmp/bundle" >/dev/null
umoci config --image "$layout:$image_tag" --config.entrypoint /pause --config.user 65535:65535 \
  --os linux --architecture amd64
umoci gc --layout "$layout"
tar -C "$layout" -cf "$tmp/pause.tar" .
say "made the pause image in $(secs "$t0" "$(now)") s ($(stat -c %s "$tmp/pause.tar") bytes)"

mv -f "$tmp/crictl" "$out_dir/crictl"
mv -f "$tmp/pause.tar" "$out_dir/pause.tar"
echo "$image_tag" >"$out_dir/pause.tag"
echo "$hash" >"$stamp"
say "total $(secs "$t_all" "$(now)") s"
echo "$out_dir"
