# Shared by the peers' build scripts (test/*/build*.sh), sourced after the caller sets `me` (its name in
# messages): logging, timings, the Debian packages a build needs, and Go on PATH. Not an input of any build's
# stamp: nothing here changes what a build produces.

say() { echo "$me: $*" >&2; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# need_packages NAME...: apt-get installs the missing ones (as root; the package lists are updated once if the
# first try fails), else exits 1 naming them.
need_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [[ "$(id -u)" != 0 ]]; then
    say "missing packages ${missing[*]}; run this script as root to apt-get install them"
    exit 1
  fi
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
    { apt-get update >&2 && apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
}

# need_go WHAT: Go on PATH (a machine of this kind has it in /usr/local/go), else exits 1 saying WHAT needs it.
need_go() {
  if ! command -v go >/dev/null 2>&1 && [[ -x /usr/local/go/bin/go ]]; then
    export PATH="/usr/local/go/bin:$PATH"
  fi
  if ! command -v go >/dev/null 2>&1; then
    say "go is not installed (needed to build $1)"
    exit 1
  fi
}
