#!/usr/bin/env bash
# Builds the multus-ts container image offline, from scratch, with Debian's umoci (docs/install.md, "Image"):
#
#   npm run image            # -> build/image/oci (OCI image layout) + build/image/multus-ts-<version>.tar
#
# Multus' image layout (its images/Dockerfile and Dockerfile.thick), so Multus' own manifests run it:
# build/multus at /usr/src/multus-cni/bin/multus, hard-linked there as multus-daemon, install_multus, passthru and
# thin_entrypoint and at /thin_entrypoint and /install_multus (the executable picks its role from its name,
# docs/install.md "Multus' names"); build/multus-shim (when built) at /usr/src/multus-cni/bin/multus-shim, with
# /usr/sbin/chroot for the resident daemon's chrootDir and /usr/bin/nsenter + /usr/bin/ip for the routes it sets
# in pods; Debian's busybox-static as /bin/busybox with /bin/sh, cp, mv, ... (rke2's chart runs `sh -c "cp ..."`);
# exactly the shared libraries `ldd` lists (none for the static shim and busybox; at the paths it lists);
# /etc/ssl/certs/ca-certificates.crt, a /var/run -> /run link, nothing else.
# Entrypoint: /thin_entrypoint (as Multus' thin image). Labels:
# org.opencontainers.image.version (package.json) and .revision (git HEAD, "-dirty" with uncommitted changes).
# The tarball is the layout as an OCI archive: `ctr -n k8s.io images import` and `podman load -i` read it; the
# index names the image ${MULTUS_TS_IMAGE_NAME:-ghcr.io/multus-ts/multus-ts}:<version>.
# Prints the sizes. Needs: umoci, ldd, tar, node, /usr/bin/busybox (busybox-static); build/multus (npm run build).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="${MULTUS_TS_IMAGE_DIR:-$root/build/image}"
name="${MULTUS_TS_IMAGE_NAME:-ghcr.io/multus-ts/multus-ts}"
say() { echo "image: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }

command -v umoci >/dev/null || die "umoci is not installed (apt-get install umoci, or bash scripts/setup.sh)"
[[ -x "$root/build/multus" ]] || die "build/multus is missing: run npm run build first"
payload="$(cd "$root/build" && ls -d .multus-bun-* 2>/dev/null | head -1)"
[[ -n "$payload" ]] || die "build/.multus-bun-<id> is missing: run npm run build first"
busybox=/usr/bin/busybox
[[ -x "$busybox" ]] || die "$busybox is missing (apt-get install busybox-static, or bash scripts/setup.sh)"
ldd "$busybox" >/dev/null 2>&1 && die "$busybox is not static: install busybox-static, not busybox"

version="$(node -p "require('$root/package.json').version")"
commit="$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ "$commit" != unknown && -n "$(git -C "$root" status --porcelain -- src scripts package.json 2>/dev/null)" ]]; then
  commit="$commit-dirty"
fi
ca=/etc/ssl/certs/ca-certificates.crt
[[ -f "$ca" ]] || die "$ca is missing (apt-get install ca-certificates)"

# the launcher (static) and the Bun executable it starts (docs/build.md, "The launcher")
bins=("$root/build/multus" "$root/build/$payload")
extra=()
if [[ -x "$root/build/multus-shim" ]]; then
  bins+=("$root/build/multus-shim")
  # the resident daemon runs delegates with chroot(8) into the host's root (chrootDir, docs/resident.md), and
  # sets a pod's routes itself (hot-plug, default-route) with nsenter(1) and ip(8) (src/routes/netns-routes.ts)
  extra+=(/usr/sbin/chroot /usr/bin/nsenter /usr/bin/ip)
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/multus-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT
layout="$work/oci"
umoci init --layout "$layout"
umoci new --image "$layout:$version"
umoci unpack --image "$layout:$version" "$work/bundle" >/dev/null
rootfs="$work/bundle/rootfs"

install -d -m 0755 "$rootfs/usr/src/multus-cni/bin" "$rootfs/etc/ssl/certs" "$rootfs/bin"
for b in "${bins[@]}"; do
  install -m 0755 "$b" "$rootfs/usr/src/multus-cni/bin/$(basename "$b")"
done
# Multus' names for the one executable: hard links (one file in the layer, the role from argv[0])
for n in multus-daemon install_multus passthru thin_entrypoint; do
  ln "$rootfs/usr/src/multus-cni/bin/multus" "$rootfs/usr/src/multus-cni/bin/$n"
done
for n in thin_entrypoint install_multus; do ln "$rootfs/usr/src/multus-cni/bin/multus" "$rootfs/$n"; done
# the launcher starts the Bun executable beside it, wherever it is linked (docs/build.md, "The launcher")
ln "$rootfs/usr/src/multus-cni/bin/$payload" "$rootfs/$payload"
# a shell and the few tools init containers script with (rke2-multus: sh -c "cp ... && cp ...")
install -m 0755 "$busybox" "$rootfs/bin/busybox"
for t in sh cp mv rm ln ls cat mkdir chmod echo test sleep true false; do ln -s busybox "$rootfs/bin/$t"; done
for x in "${extra[@]}"; do
  install -D -m 0755 "$x" "$rootfs$x"
done
# Every library ldd resolves ("name => /path (addr)") and the loader ("/lib64/ld-linux-x86-64.so.2 (addr)"),
# at the path ldd prints, dereferenced. linux-vdso has no file.
libs="$(for b in "${bins[@]}" "${extra[@]}"; do ldd "$b" || true; done | awk '/=> \// { print $3 } /^[ \t]*\/[^ ]+ \(/ { print $1 }' | sort -u)"
[[ -n "$libs" ]] || die "ldd listed no libraries for ${bins[*]}"
for l in $libs; do
  src="$(readlink -f "$l")"
  install -D -m "$(stat -c %a "$src")" "$src" "$rootfs$l"
done
install -m 0644 "$ca" "$rootfs$ca"
# /var/run -> /run, as on Debian: runtimes pass CNI_NETNS as /var/run/netns/<name> (containerd's default) and
# the resident DaemonSet mounts the host's /run/netns, which the daemon must reach under both names.
install -d -m 0755 "$rootfs/run" "$rootfs/var"
ln -s ../run "$rootfs/var/run"

umoci repack --image "$layout:$version" "$work/bundle" >/dev/null
umoci config --image "$layout:$version" --os linux --architecture amd64 \
  --config.entrypoint /thin_entrypoint \
  --config.env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.revision=$commit" \
  --config.label "org.opencontainers.image.source=https://github.com/multus-ts/multus-ts" \
  --config.label "org.opencontainers.image.title=multus-ts" \
  --history.created_by "scripts/image.sh" >/dev/null
umoci gc --layout "$layout"

rm -rf "$out"
mkdir -p "$out"
cp -a "$layout" "$out/oci"
chmod 0644 "$out/oci/index.json"
# The tarball's index names the image in full: containerd reads io.containerd.image.name, podman the ref.name
# (the layout in build/image/oci keeps the plain tag, as umoci and skopeo address it: oci:build/image/oci:<version>).
node - "$layout/index.json" "$name:$version" <<'EOF'
const fs = require('fs');
const [file, ref] = process.argv.slice(2);
const index = JSON.parse(fs.readFileSync(file, 'utf8'));
for (const m of index.manifests) {
  m.annotations = { ...m.annotations, 'org.opencontainers.image.ref.name': ref, 'io.containerd.image.name': ref };
}
fs.writeFileSync(file, JSON.stringify(index));
fs.chmodSync(file, 0o644);
EOF
tarball="$out/multus-ts-$version.tar"
tar -C "$layout" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$tarball" .
layer="$(du -b "$out"/oci/blobs/sha256/* | sort -n | tail -1 | cut -f1)"
say "files: $(cd "$rootfs" && find . -type f | sort | tr '\n' ' ')"
echo "image: $tarball $(du -b "$tarball" | cut -f1) bytes ($(du -h "$tarball" | cut -f1)), compressed layer $layer bytes," \
  "$name:$version, revision $commit"
