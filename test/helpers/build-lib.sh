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

# files_hash FILE...: the sha256 of the files' contents, in order: a build's stamp.
files_hash() { cat "$@" | sha256sum | cut -d' ' -f1; }

# begin_build OUT_DIR HASH OUTPUT...: a cached build's first step. When OUT_DIR/build.sha256 holds HASH and every
# OUTPUT (a name in OUT_DIR: *.tar and *.yaml files present, anything else executable) is there, it says so,
# prints OUT_DIR on stdout and exits 0. Otherwise it makes OUT_DIR (mode 0700), removes the stamp (a build
# stopped midway leaves none) and sets $tmp to a fresh dir inside OUT_DIR (the same filesystem, so outputs are
# renamed into place), removed on exit. $stamp names the stamp: the caller writes HASH to it once its outputs
# are in place.
begin_build() {
  local dir=$1 hash=$2 f ok=true
  shift 2
  stamp="$dir/build.sha256"
  for f in "$@"; do
    case $f in
      *.tar | *.yaml) [[ -f "$dir/$f" ]] ;;
      *) [[ -x "$dir/$f" ]] ;;
    esac || ok=false
  done
  if $ok && [[ -f "$stamp" && "$(cat "$stamp")" == "$hash" ]]; then
    say "$dir/{$(IFS=,; echo "$*")} up to date"
    echo "$dir"
    exit 0
  fi
  mkdir -p "$dir"
  chmod 0700 "$dir"
  rm -f "$stamp"
  tmp="$(mktemp -d "$dir/.build.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
}

# go_mod_download DIR: the wrapper module's dependencies downloaded (from the proxy the first time), timed.
go_mod_download() {
  local t0
  say "go $(go env GOVERSION); downloading modules"
  t0="$(now)"
  (cd "$1" && go mod download)
  say "modules ready in $(secs "$t0" "$(now)") s"
}
