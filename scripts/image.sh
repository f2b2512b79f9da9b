#!/usr/bin/env bash
# Builds the multus-ts container image offline, from scratch, with Debian's umoci, for linux/amd64 and linux/arm64
# in one OCI index (docs/install.md, "Image"):
#
#   npm run image                       # -> build/image/: oci/ (OCI layout), multus-ts-<tag>.tar, deployments/, chart
#   npm run image -- --tag TAG          # another tag (also MULTUS_TS_IMAGE_TAG)
#   npm run image -- --platforms amd64  # one platform (also MULTUS_TS_IMAGE_PLATFORMS; default amd64,arm64)
#
# The tag is <version>-<short commit>, with -dirty when the work tree has changes: a rebuilt image has a new tag, so
# a DaemonSet set to it rolls out (IfNotPresent never pulls a tag again). With it, build/image/deployments/*.yml are
# our manifests naming that image, and build/image/multus-<chart version>.tgz the chart packaged with it as its
# appVersion (the image's default tag); the committed files keep the default 0.1.0.
#
# Multus' image layout (its images/Dockerfile and Dockerfile.thick), so Multus' own manifests run it: the executable
# (docs/build.md "The launcher") stored once: the launcher build/multus.launcher at /usr/src/multus-cni/bin/multus,
# hard-linked there as multus-daemon, install_multus, passthru and thin_entrypoint and at /thin_entrypoint and
# /install_multus (the role from argv[0]), and the Bun executable it starts, build/.multus-bun-<id>, beside it
# there and hard-linked in / (build/multus, which carries both in one file for a copy alone, would be a second
# copy of the Bun executable). `install_multus` and `multus install` copy both to the node. Then
# build/multus-shim at /usr/src/multus-cni/bin/multus-shim, with /usr/sbin/chroot, /usr/bin/nsenter and /usr/bin/ip
# (the resident daemon's delegates and pod routes); Debian's busybox-static as /bin/busybox with /bin/sh, cp, mv,
# ... (rke2's chart runs `sh -c "cp ..."`); exactly the shared libraries these link (ldd on amd64, their ELF
# NEEDED entries in the arm64 root on arm64); /etc/ssl/certs/ca-certificates.crt, a /var/run -> /run link.
# amd64 takes build/ and this machine's files; arm64 build/arm64/ (built here: npm run build -- --arch arm64) and
# <cache>/arm64-root (scripts/setup-arm64.sh). Entrypoint /thin_entrypoint (as Multus' thin image). Labels:
# org.opencontainers.image.version (package.json) and .revision (git HEAD, "-dirty" with uncommitted changes).
# The tarball is the layout as an OCI archive: `ctr -n k8s.io images import --all-platforms` and `podman load -i`
# read it; its index names the image ${MULTUS_TS_IMAGE_NAME:-ghcr.io/multus-ts/multus-ts}:<tag>.
# Prints the sizes. Needs: umoci, ldd, readelf, tar, node, /usr/bin/busybox (busybox-static); build/multus.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="${MULTUS_TS_IMAGE_DIR:-$root/build/image}"
name="${MULTUS_TS_IMAGE_NAME:-ghcr.io/multus-ts/multus-ts}"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
tag="${MULTUS_TS_IMAGE_TAG:-}"
platforms="${MULTUS_TS_IMAGE_PLATFORMS:-amd64,arm64}"
say() { echo "image: $*" >&2; }
die() { say "FAILED: $*"; exit 1; }
while (($#)); do
  case "$1" in
    --tag) tag="${2:?--tag TAG}"; shift 2 ;;
    --tag=*) tag="${1#--tag=}"; shift ;;
    --platforms) platforms="${2:?--platforms amd64,arm64}"; shift 2 ;;
    --platforms=*) platforms="${1#--platforms=}"; shift ;;
    *) die "unknown argument $1 (--tag TAG, --platforms amd64,arm64)" ;;
  esac
done
IFS=, read -r -a arches <<<"$platforms"

command -v umoci >/dev/null || die "umoci is not installed (apt-get install umoci, or bash scripts/setup.sh)"
[[ -x "$root/build/multus" ]] || die "build/multus is missing: run npm run build first"
busybox=/usr/bin/busybox
[[ -x "$busybox" ]] || die "$busybox is missing (apt-get install busybox-static, or bash scripts/setup.sh)"
ldd "$busybox" >/dev/null 2>&1 && die "$busybox is not static: install busybox-static, not busybox"
ca=/etc/ssl/certs/ca-certificates.crt
[[ -f "$ca" ]] || die "$ca is missing (apt-get install ca-certificates)"

version="$(node -p "require('$root/package.json').version")"
commit="$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
short="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ "$commit" != unknown && -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]]; then
  commit="$commit-dirty"
  short="$short-dirty"
fi
tag="${tag:-$version-$short}"
[[ "$tag" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "--tag $tag is not an image tag ([A-Za-z0-9_][A-Za-z0-9_.-]*)"

work="$(mktemp -d "${TMPDIR:-/tmp}/multus-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT
layout="$work/oci"
umoci init --layout "$layout"

# The libraries `bin...` link and their loader, as "path-in-image source-file" lines. amd64: what ldd resolves
# ("name => /path (addr)", "/lib64/ld-linux-x86-64.so.2 (addr)"; linux-vdso has no file). arm64: the ELF NEEDED
# entries, resolved in the arm64 root's lib dirs as the loader does, transitively, and the program interpreter.
libs_amd64() {
  for b in "$@"; do ldd "$b" || true; done | awk '/=> \// { print $3 } /^[ \t]*\/[^ ]+ \(/ { print $1 }' | sort -u |
    while read -r l; do echo "$l $(readlink -f "$l")"; done
}
libs_arm64() {
  local sys="$1" queue=("${@:2}") seen=" " f n p
  while ((${#queue[@]})); do
    f="${queue[0]}"
    queue=("${queue[@]:1}")
    p="$(readelf -l "$f" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')"
    [[ -n "$p" && "$seen" != *" $p "* ]] && seen+="$p " && echo "$p $(realpath "$sys$p")"
    for n in $(readelf -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
      [[ "$n" == ld-linux-* ]] && continue # libc's NEEDED loader: the interpreter itself
      for d in /lib/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu; do
        [[ -e "$sys$d/$n" ]] || continue
        if [[ "$seen" != *" $d/$n "* ]]; then
          seen+="$d/$n "
          echo "$d/$n $(realpath "$sys$d/$n")"
          queue+=("$(realpath "$sys$d/$n")")
        fi
        continue 2
      done
      die "$f needs $n, which is not in $sys (bash scripts/setup-arm64.sh)"
    done
  done | sort -u
}

# One platform's image in the layout, tagged with its architecture: $1 = amd64 | arm64.
platform_image() {
  local arch="$1" bin sys libs rootfs
  if [[ "$arch" == amd64 ]]; then
    bin="$root/build"
    sys=""
  else
    sys="$cache/arm64-root"
    [[ -x "$sys/bin/busybox" ]] || die "$sys is missing: bash scripts/setup-arm64.sh (or scripts/setup.sh)"
    say "npm run build -- --arch $arch"
    node "$root/scripts/build.mjs" --arch "$arch" --quiet >&2 || die "the $arch build failed"
    bin="$root/build/$arch"
  fi
  [[ -x "$bin/multus" ]] || die "$bin/multus is missing"
  umoci new --image "$layout:$arch"
  umoci unpack --image "$layout:$arch" "$work/$arch" >/dev/null
  rootfs="$work/$arch/rootfs"
  local dir=/usr/src/multus-cni/bin payload
  payload="$(cd "$bin" && ls -d .multus-bun-* | head -1)"
  [[ -n "$payload" && -f "$bin/multus.launcher" ]] || die "$bin/.multus-bun-<id> or multus.launcher is missing: npm run build"
  install -d -m 0755 "$rootfs$dir" "$rootfs/etc/ssl/certs" "$rootfs/bin"
  # The launcher (1.7 MiB) without the Bun executable it carries in build/multus, and that Bun executable beside
  # it, each stored once: every one of Multus' names is a hard link of the launcher, and the launcher starts the
  # .multus-bun-<id> beside the name it was run by (a hard link in / too). No container extracts anything: an
  # extraction's page cache is charged to the container, and Multus' 15Mi install container then never finished.
  install -m 0755 "$bin/multus.launcher" "$rootfs$dir/multus"
  install -m 0755 "$bin/$payload" "$rootfs$dir/$payload"
  ln "$rootfs$dir/$payload" "$rootfs/$payload"
  for n in multus-daemon install_multus passthru thin_entrypoint; do ln "$rootfs$dir/multus" "$rootfs$dir/$n"; done
  for n in thin_entrypoint install_multus; do ln "$rootfs$dir/multus" "$rootfs/$n"; done
  local progs=("$bin/$payload") extra=()
  if [[ -x "$bin/multus-shim" ]]; then
    install -m 0755 "$bin/multus-shim" "$rootfs$dir/multus-shim"
    # the resident daemon runs delegates with chroot(8) into the host's root (chrootDir, docs/resident.md), and
    # sets a pod's routes itself (hot-plug, default-route) with nsenter(1) and ip(8) (src/routes/netns-routes.ts)
    extra=(/usr/sbin/chroot /usr/bin/nsenter /usr/bin/ip)
  fi
  # a shell and the few tools init containers script with (rke2-multus: sh -c "cp ... && cp ...")
  install -m 0755 "${sys:-/usr}/bin/busybox" "$rootfs/bin/busybox"
  for t in sh cp mv rm ln ls cat mkdir chmod echo test sleep true false; do ln -s busybox "$rootfs/bin/$t"; done
  local x src
  for x in "${extra[@]}"; do
    src="$sys$x"
    [[ -e "$src" ]] || src="$sys${x#/usr}" # Debian 12's packages still ship /bin/ip, /bin/...
    install -D -m 0755 "$(realpath "$src")" "$rootfs$x"
    progs+=("$(realpath "$src")")
  done
  # the Bun executable links libc; the launcher, the shim and busybox are static
  if [[ "$arch" == amd64 ]]; then libs="$(libs_amd64 "${progs[@]}")"; else libs="$(libs_arm64 "$sys" "${progs[@]}")"; fi
  [[ -n "$libs" ]] || die "no libraries found for ${progs[*]}"
  local l
  while read -r l src; do
    [[ -z "$sys" || "$src" == "$sys"/* ]] || die "$l resolves outside $sys"
    install -D -m "$(stat -c %a "$src")" "$src" "$rootfs$l"
  done <<<"$libs"
  install -m 0644 "$ca" "$rootfs$ca"
  # /var/run -> /run, as on Debian: runtimes pass CNI_NETNS as /var/run/netns/<name> (containerd's default) and
  # the resident DaemonSet mounts the host's /run/netns, which the daemon must reach under both names.
  install -d -m 0755 "$rootfs/run" "$rootfs/var"
  ln -s ../run "$rootfs/var/run"

  umoci repack --image "$layout:$arch" "$work/$arch" >/dev/null
  umoci config --image "$layout:$arch" --os linux --architecture "$arch" \
    --config.entrypoint /thin_entrypoint \
    --config.env PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    --config.label "org.opencontainers.image.version=$version" \
    --config.label "org.opencontainers.image.revision=$commit" \
    --config.label "org.opencontainers.image.source=https://github.com/multus-ts/multus-ts" \
    --config.label "org.opencontainers.image.title=multus-ts" \
    --history.created_by "scripts/image.sh" >/dev/null
  say "linux/$arch: $(cd "$rootfs" && find . -type f | sort | tr '\n' ' ')"
  rm -rf "$work/$arch"
}

for arch in "${arches[@]}"; do
  [[ "$arch" == amd64 || "$arch" == arm64 ]] || die "--platforms: amd64 and/or arm64, not $arch"
  platform_image "$arch"
done
umoci gc --layout "$layout"
# one index of the platforms' manifests, tagged <tag> in the layout; the archive's copy names the image in full
sizes="$(node "$here/image-index.mjs" "$layout" "$tag" "$name:$tag" "$work/archive-index.json")"

rm -rf "$out"
mkdir -p "$out"
cp -a "$layout" "$out/oci"
chmod 0644 "$out/oci/index.json"
cp "$work/archive-index.json" "$layout/index.json"
chmod 0644 "$layout/index.json"
tarball="$out/multus-ts-$tag.tar"
tar -C "$layout" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$tarball" .

# our manifests and the chart, naming this image
bash "$here/image-manifests.sh" "$out" "$name" "$tag"
echo "image: $tarball $(du -b "$tarball" | cut -f1) bytes ($(du -h "$tarball" | cut -f1)), $name:$tag," \
  "revision $commit; compressed layers: $sizes"
