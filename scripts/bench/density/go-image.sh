#!/usr/bin/env bash
# The Go Multus v4.3.0 image of the density bench, built offline with umoci like scripts/image.sh builds ours:
#
#   bash scripts/bench/density/go-image.sh OUT_DIR GOMULTUS_DIR    # -> OUT_DIR/gomultus.tar (OCI archive)
#
# Contents: the binaries test/peers/build-gomultus.sh built (multus, multus-shim, multus-daemon, thin_entrypoint,
# install_multus, passthru) at /usr/src/multus-cni/bin/ and thin_entrypoint and install_multus also at /, as
# Multus' own images have them (so Multus' deployments/ manifests run it, test/runtime/multus-lane.ts); busybox
# (Debian's busybox-static) as /bin/sh, cp and mv for the density bench's thick init container; /etc/passwd and
# /etc/group with root (Multus' thick image is Debian's).
# Named ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0.
set -euo pipefail
out="$1"
go="$2"
ref=ghcr.io/k8snetworkplumbingwg/multus-cni:v4.3.0
command -v umoci >/dev/null || { echo "go-image.sh: umoci is missing" >&2; exit 1; }
[[ -x /usr/bin/busybox ]] || { echo "go-image.sh: /usr/bin/busybox is missing (apt-get install busybox-static)" >&2; exit 1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/gomultus-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT
layout="$work/oci"
umoci init --layout "$layout"
umoci new --image "$layout:v4.3.0"
umoci unpack --image "$layout:v4.3.0" "$work/bundle" >/dev/null
rootfs="$work/bundle/rootfs"
install -d -m 0755 "$rootfs/usr/src/multus-cni/bin" "$rootfs/bin" "$rootfs/run" "$rootfs/var" "$rootfs/tmp"
for b in multus multus-shim multus-daemon thin_entrypoint install_multus passthru; do
  install -m 0755 "$go/$b" "$rootfs/usr/src/multus-cni/bin/$b"
done
install -m 0755 "$go/thin_entrypoint" "$rootfs/thin_entrypoint"
install -m 0755 "$go/install_multus" "$rootfs/install_multus"
install -m 0755 /usr/bin/busybox "$rootfs/bin/busybox"
for t in sh cp mv; do ln -s busybox "$rootfs/bin/$t"; done
ln -s ../run "$rootfs/var/run"
# multus-daemon checks it runs as root with os/user, which (without cgo) reads /etc/passwd; without the file it
# dereferences a nil user and panics (cmd/multus-daemon/main.go, startMultusDaemon)
install -d -m 0755 "$rootfs/etc"
echo 'root:x:0:0:root:/root:/bin/sh' >"$rootfs/etc/passwd"
echo 'root:x:0:' >"$rootfs/etc/group"
umoci repack --image "$layout:v4.3.0" "$work/bundle" >/dev/null
umoci config --image "$layout:v4.3.0" --os linux --architecture amd64 \
  --config.entrypoint /usr/src/multus-cni/bin/multus-daemon --config.env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  --history.created_by "scripts/bench/density/go-image.sh" >/dev/null
umoci gc --layout "$layout"
node - "$layout/index.json" "$ref" <<'JS'
const fs = require('fs');
const [file, ref] = process.argv.slice(2);
const index = JSON.parse(fs.readFileSync(file, 'utf8'));
for (const m of index.manifests) {
  m.annotations = { ...m.annotations, 'org.opencontainers.image.ref.name': ref, 'io.containerd.image.name': ref };
}
fs.writeFileSync(file, JSON.stringify(index));
JS
mkdir -p "$out"
tar -C "$layout" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$out/gomultus.tar" .
echo "$out/gomultus.tar"
