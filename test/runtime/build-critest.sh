#!/usr/bin/env bash
# Builds what the critest tier (test/runtime/critest.test.ts) needs:
#  - critest, cri-tools' CRI validation suite (a Ginkgo test binary: `go test -c sigs.k8s.io/cri-tools/cmd/critest`)
#    through the wrapper module test/runtime/critest (its go.mod pins sigs.k8s.io/cri-tools v1.37.0);
#  - its test images, made offline: Debian's busybox-static (/bin/busybox and a link per applet) packed by umoci
#    into one OCI layout with two tags, `busybox` (critest's default container image; the specs give it a
#    command: top, cat, hostname) and `httpd` (the web-server image of the port-mapping specs: busybox httpd
#    serving /www/index.html on port 80), tarred as an OCI archive; and the --test-images-file that maps
#    critest's image names to them (images.yaml).
#
# Output: ${MULTUS_TS_CACHE_DIR:-<repo>/.cache}/critest/{critest,images.tar,images.yaml}, reused while the inputs
# (go.mod, go.sum, this script, the busybox package's version) are unchanged (their hash is kept in build.sha256).
# Installs busybox-static, umoci and skopeo (CRI-O's image import) with apt-get when missing (as root). Prints
# timings on stderr and the dir on stdout. See docs/archive/kubernetes-tests.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${MULTUS_TS_CACHE_DIR:-$root/.cache}"
out_dir="$cache/critest"
# the images' repository; runtime fixtures import images.tar under it (one tag per image)
image_repo="localhost/critest"

me="runtime/build-critest.sh"
# shellcheck source=../helpers/build-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../helpers/build-lib.sh"

need_packages busybox-static umoci skopeo

need_go "critest"

busybox_version="$(dpkg-query -W -f='${Version}' busybox-static)"
hash="$({ cat "$here/critest/go.mod" "$here/critest/go.sum" "$here/build-critest.sh"; echo "$busybox_version"; } |
  sha256sum | cut -d' ' -f1)"
begin_build "$out_dir" "$hash" critest images.tar
t_all="$(now)"

t0="$(now)"
say "go $(go env GOVERSION); building critest (go test -c sigs.k8s.io/cri-tools/cmd/critest)"
cver="$(cd "$here/critest" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' sigs.k8s.io/cri-tools)"
(cd "$here/critest" && GOFLAGS=-mod=mod CGO_ENABLED=0 go test -c -trimpath \
  -ldflags="-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$cver" -o "$tmp/critest" sigs.k8s.io/cri-tools/cmd/critest)
say "built critest in $(secs "$t0" "$(now)") s: $("$tmp/critest" --version 2>/dev/null | head -1)"

# the images: one rootfs (busybox and its applets, /www/index.html), two tags that differ in their entrypoint
t0="$(now)"
layout="$tmp/layout"
umoci init --layout "$layout"
umoci new --image "$layout:busybox"
umoci unpack --image "$layout:busybox" "$tmp/bundle" >/dev/null
rootfs="$tmp/bundle/rootfs"
mkdir -p "$rootfs/bin" "$rootfs/www" "$rootfs/tmp" "$rootfs/etc"
install -m 0755 /bin/busybox "$rootfs/bin/busybox"
for applet in $(/bin/busybox --list); do
  [[ "$applet" == busybox ]] || ln -sf busybox "$rootfs/bin/$applet"
done
echo '<html><body>multus-ts critest</body></html>' >"$rootfs/www/index.html"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\n' >"$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"
umoci repack --image "$layout:busybox" "$tmp/bundle" >/dev/null
umoci config --image "$layout:busybox" --config.cmd /bin/sh --config.env PATH=/bin --os linux --architecture amd64
umoci config --image "$layout:busybox" --tag httpd --clear=config.cmd \
  --config.entrypoint /bin/httpd --config.entrypoint -f --config.entrypoint -p --config.entrypoint 80 \
  --config.entrypoint -h --config.entrypoint /www --config.exposedports 80/tcp
umoci gc --layout "$layout"
tar -C "$layout" -cf "$tmp/images.tar" .
cat >"$tmp/images.yaml" <<EOF
defaultTestContainerImage: $image_repo:busybox
webServerTestImage: $image_repo:httpd
EOF
say "made the images in $(secs "$t0" "$(now)") s ($(stat -c %s "$tmp/images.tar") bytes)"

mv -f "$tmp/critest" "$out_dir/critest"
mv -f "$tmp/images.tar" "$out_dir/images.tar"
mv -f "$tmp/images.yaml" "$out_dir/images.yaml"
echo "$image_repo" >"$out_dir/images.repo"
echo "$hash" >"$stamp"
say "total $(secs "$t_all" "$(now)") s"
echo "$out_dir"
