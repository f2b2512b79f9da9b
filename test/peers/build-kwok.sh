#!/usr/bin/env bash
# Builds kwok v0.8.0 (sigs.k8s.io/kwok/cmd/kwok), the controller that simulates the nodes and pods of the cluster
# bench (`npm run bench -- --scenario cluster`, scripts/bench/cluster.mjs), through the wrapper module in
# test/peers/kwok (its go.mod pins the version). No CI test uses kwok: the bench runs this script on demand, and
# scripts/setup.sh does not.
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/kwok/kwok and stages.yaml (kwok's own default stages, the ones
# kwokctl gives it: node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete, pod-delete; the kwok
# binary has none built in and refuses to start without), reused while go.mod, go.sum and this script are
# unchanged (their hash is kept beside the binary in build.sha256). Prints timings on stderr and the output dir
# on stdout.
#
# Needs Go (>= 1.26, kwok v0.8.0's go directive) and, on the first build, the Go module proxy; later builds work
# offline from the module cache.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/kwok"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/kwok"
mod=sigs.k8s.io/kwok

me="build-kwok.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

need_go "kwok"

hash="$(files_hash "$src/go.mod" "$src/go.sum" "$here/build-kwok.sh")"
begin_build "$out_dir" "$hash" kwok stages.yaml

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
export CGO_ENABLED=0

t_all="$(now)"
go_mod_download "$src"
version="$(cd "$src" && go list -m -f '{{.Version}}' "$mod")"
# kwok v0.8.0 carries its version in pkg/consts (`kwok --version` prints it).
say "building kwok ($mod/cmd/kwok $version)"
(cd "$src" && go build -trimpath -ldflags="-s -w" -o "$tmp/kwok" "$mod/cmd/kwok")
# It must run before it replaces the cached one.
say "$("$tmp/kwok" --version 2>&1 | tr '\n' ' ')"
moddir="$(cd "$src" && go list -m -f '{{.Dir}}' "$mod")"
stage="$moddir/kustomize/stage"
for f in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease pod/fast/pod-ready \
  pod/fast/pod-complete pod/fast/pod-delete; do
  echo "---"
  cat "$stage/$f.yaml"
done >"$tmp/stages.yaml"
mv -f "$tmp/stages.yaml" "$out_dir/stages.yaml"
mv -f "$tmp/kwok" "$out_dir/kwok"
echo "$hash" >"$stamp"
say "total $(secs "$t_all" "$(now)") s"
echo "$out_dir"
