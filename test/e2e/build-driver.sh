#!/usr/bin/env bash
# Builds the libcni driver used by the end-to-end tests into .cache/bin/libcni-driver.
# The binary is reused while go.mod, go.sum and main.go are unchanged (their hash is kept beside it in
# .cache/bin/libcni-driver.sha256). Needs Go; the first build downloads github.com/containernetworking/cni
# v1.3.0 through the Go module proxy, later builds work offline from the module cache.
# Prints the driver's path on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/libcni-driver"
out_dir="$root/.cache/bin"
out="$out_dir/libcni-driver"
stamp="$out.sha256"

if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  echo "build-driver.sh: go is not installed (needed to build the libcni driver)" >&2
  exit 1
fi

hash="$(cd "$src" && cat go.mod go.sum main.go | sha256sum | cut -d' ' -f1)"
if [[ -x "$out" && -f "$stamp" && "$(cat "$stamp")" == "$hash" ]]; then
  echo "build-driver.sh: $out is up to date" >&2
  echo "$out"
  exit 0
fi

mkdir -p "$out_dir"
# Go keeps its build and module caches under $HOME; give it a place when the environment has no HOME.
if [[ -z "${HOME:-}" ]]; then
  export GOCACHE="${GOCACHE:-$root/.cache/go-build}" GOMODCACHE="${GOMODCACHE:-$root/.cache/go-mod}"
  export GOPATH="${GOPATH:-$root/.cache/go}"
fi
echo "build-driver.sh: building $out" >&2
tmp="$out.tmp.$$"
trap 'rm -f "$tmp"' EXIT
(cd "$src" && GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod" CGO_ENABLED=0 go build -trimpath -o "$tmp" .)
mv -f "$tmp" "$out"
echo "$hash" >"$stamp"
echo "$out"
