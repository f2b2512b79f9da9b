#!/usr/bin/env bash
# What an arm64 build and image need on an x64 machine (docs/build.md, "arm64"), set up by scripts/setup.sh;
# idempotent, needs root (apt-get, mount):
#   - binfmt_misc mounted and Debian's qemu-user-static registered for arm64 (qemu-aarch64, flag F: it also runs
#     inside a chroot), so that arm64 executables run as they are (the launcher execs its Bun executable);
#   - Debian's libc6:arm64 (dpkg --add-architecture arm64): the arm64 loader at /lib/ld-linux-aarch64.so.1;
#   - <cache>/arm64-root: Debian's arm64 packages unpacked (libc, busybox-static, chroot, nsenter, ip and the
#     libraries they link), what scripts/image.sh puts into the arm64 image;
#   - the pinned arm64 Bun (scripts/build-steps/arch.mjs, npm pack into the cache).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
say() { echo "setup-arm64: $*" >&2; }

# the arm64 packages of the image: the same as the amd64 image takes from this machine
packages=(libc6 busybox-static coreutils util-linux iproute2 libselinux1 libpcre2-8-0 libbpf1 libelf1 libmnl0 libbsd0
  libcap2 zlib1g libmd0)

if [[ "$(dpkg --print-architecture)" == arm64 ]]; then
  say "an arm64 machine: nothing to emulate"
else
  mountpoint -q /proc/sys/fs/binfmt_misc || mount binfmt_misc -t binfmt_misc /proc/sys/fs/binfmt_misc
  update-binfmts --enable qemu-aarch64 2>/dev/null || update-binfmts --import qemu-aarch64
  grep -q '^enabled' /proc/sys/fs/binfmt_misc/qemu-aarch64 || { say "qemu-aarch64 is not registered"; exit 1; }
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
    apt-get update
  fi
  if ! dpkg-query -W -f='${Status}' libc6:arm64 2>/dev/null | grep -q 'install ok installed'; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libc6:arm64
  fi
fi

want="${packages[*]}"
if [[ "$(cat "$cache/arm64-root/.packages" 2>/dev/null)" != "$want" ]]; then
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/arm64-root.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download "${packages[@]/%/:arm64}" >/dev/null) ||
    (apt-get update >/dev/null && cd "$tmp" && apt-get download "${packages[@]/%/:arm64}" >/dev/null)
  mkdir "$tmp/root"
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$tmp/root"; done
  echo "$want" >"$tmp/root/.packages"
  rm -rf "$cache/arm64-root"
  mkdir -p "$cache"
  mv "$tmp/root" "$cache/arm64-root"
  say "unpacked ${#packages[@]} arm64 packages into $cache/arm64-root"
fi
bun="$(node "$root/scripts/build-steps/arch.mjs" fetch)"
echo "binfmt qemu-aarch64 $(head -1 /proc/sys/fs/binfmt_misc/qemu-aarch64 2>/dev/null || echo 'not needed'), $cache/arm64-root, $bun"
