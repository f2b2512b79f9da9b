#!/usr/bin/env bash
# Builds CRI-O, the runtime tier's second container runtime (test/runtime/crio-*.test.ts), from Go modules:
#  - crio: github.com/cri-o/cri-o/cmd/crio through the wrapper module test/runtime/crio (its go.mod pins
#    v1.34.0), with cgo and CRI-O's own build tags for a machine without btrfs, devicemapper or gpgme
#    (containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper
#    containers_image_ostree_stub seccomp);
#  - pinns: CRI-O's small C helper that pins the sandbox's namespaces, compiled from the same module's
#    pinns/src (gcc -static, as its Makefile does).
# Debian gives the rest: conmon (CRI-O's container monitor), runc, libseccomp-dev for the build.
#
# Two of CRI-O's dependencies (github.com/containerd/nri, github.com/CloudNativeAI/model-spec) have no entry in
# the checksum database; they are named in GONOSUMDB for this build only (go.sum pins their hashes all the same).
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/crio/{crio,pinns}, reused while the inputs (go.mod, go.sum and
# this script) are unchanged (their hash is kept in build.sha256). Installs the Debian packages with apt-get when
# missing (as root). Prints timings on stderr and the dir on stdout. See docs/archive/kubernetes-tests.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/crio"
tags="containers_image_openpgp exclude_graphdriver_btrfs exclude_graphdriver_devicemapper containers_image_ostree_stub seccomp"

me="runtime/build-crio.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

need_packages conmon runc libseccomp-dev pkg-config gcc libc6-dev

need_go "CRI-O"

hash="$(files_hash "$here/crio/go.mod" "$here/crio/go.sum" "$here/build-crio.sh")"
begin_build "$out_dir" "$hash" crio pinns
t0="$(now)"
export GONOSUMDB="github.com/containerd/nri,github.com/CloudNativeAI/model-spec"
export GOFLAGS=-mod=mod
src="$(cd "$here/crio" && go list -m -f '{{.Dir}}' github.com/cri-o/cri-o 2>/dev/null || true)"
if [[ -z "$src" || ! -d "$src" ]]; then
  (cd "$here/crio" && go mod download github.com/cri-o/cri-o)
  src="$(cd "$here/crio" && go list -m -f '{{.Dir}}' github.com/cri-o/cri-o)"
fi
say "go $(go env GOVERSION); building crio (github.com/cri-o/cri-o/cmd/crio, tags: $tags)"
(cd "$here/crio" && CGO_ENABLED=1 go build -trimpath -tags "$tags" -ldflags="-s -w" -o "$tmp/crio" \
  github.com/cri-o/cri-o/cmd/crio)
say "built crio in $(secs "$t0" "$(now)") s: $("$tmp/crio" --version 2>/dev/null | head -1)"
gcc -std=c99 -Os -Wall -Wextra -static -o "$tmp/pinns" "$src"/pinns/src/*.c
strip -s "$tmp/pinns"
mv -f "$tmp/crio" "$out_dir/crio"
mv -f "$tmp/pinns" "$out_dir/pinns"
echo "$hash" >"$stamp"
say "total $(secs "$t0" "$(now)") s"
echo "$out_dir"
