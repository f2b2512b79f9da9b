#!/bin/sh
# Removes what a runtime fixture (test/runtime/runtime.ts, crio.ts) left behind once the runtime is stopped: the
# shims and sandbox (pause) processes of its containerd, or CRI-O's conmons and containers, by PID; the runtime's
# libcni caches of its sandboxes; the mounts below its temp dir; its cgroups; its "host" network namespace (with
# the bridges, veths and macvlan masters in it); then the temp dir itself unless it holds a file named "keep". Run by the fixture's stop() and by its
# watchdog when the test runner died.
#
# usage: cleanup.sh <temp dir> <host netns name> <cgroup parent name>
# Every argument is checked against the names the fixture makes before anything is touched.
set -u
dir=$1 netns=$2 cgroup=$3
case "$dir" in /*/mts-rt-*) ;; *) echo "cleanup.sh: refusing dir '$dir'" >&2; exit 2 ;; esac
case "$netns" in mts-rt-*) ;; *) echo "cleanup.sh: refusing netns '$netns'" >&2; exit 2 ;; esac
case "$cgroup" in mts-rt-*) ;; *) echo "cleanup.sh: refusing cgroup '$cgroup'" >&2; exit 2 ;; esac
case "$dir$netns$cgroup" in *[!A-Za-z0-9/._-]*) echo "cleanup.sh: unexpected characters" >&2; exit 2 ;; esac

# containerd itself and the tests' own daemons (their <name>.pid files), the shims of this containerd (their
# command line names its socket) and the sandbox processes (init.pid of each task).
pids=""
for f in "$dir"/*.pid; do [ -f "$f" ] && pids="$pids $(cat "$f")"; done
for p in /proc/[0-9]*; do
  if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "-address $dir/containerd.sock "; then
    pids="$pids ${p#/proc/}"
  fi
done
for f in "$dir"/state/io.containerd.runtime.v2.task/*/*/init.pid; do
  [ -f "$f" ] && pids="$pids $(cat "$f")"
done
# CRI-O (crio.ts): the conmon of each container (its command line names the fixture's dirs) and the containers'
# processes (the pidfile conmon wrote for each)
for p in /proc/[0-9]*; do
  [ "$(cat "$p/comm" 2>/dev/null)" = conmon ] || continue
  if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "$dir/"; then
    pids="$pids ${p#/proc/}"
  fi
done
for f in "$dir"/runroot/overlay-containers/*/userdata/pidfile; do
  [ -f "$f" ] && pids="$pids $(cat "$f")"
done
for p in $pids; do
  case "$p" in *[!0-9]*|'') continue ;; esac
  kill -9 "$p" 2>/dev/null
done
[ -n "$pids" ] && sleep 0.2

# containerd's and CRI-O's libcni keep result caches in the machine's /var/lib/cni (not configurable in either):
# remove those of this fixture's sandboxes (64-hex IDs, the task dirs' names), and their cgroups below test.slice
for t in "$dir"/state/io.containerd.runtime.v2.task/*/* "$dir"/runroot/overlay-containers/*; do
  id=${t##*/}
  case "$id" in *[!0-9a-f]*|'') continue ;; esac
  [ ${#id} -eq 64 ] || continue
  rm -f /var/lib/cni/results/*-"$id"-*
  # critest's sandboxes and containers: cgroup parent /test.slice when the runtime does not answer RuntimeConfig
  for c in /sys/fs/cgroup/test.slice/"$id" /sys/fs/cgroup/*/test.slice/"$id"; do
    [ -d "$c" ] && rmdir "$c" 2>/dev/null
  done
done

# mounts below the dir, deepest first (rootfs overlays, /dev/shm of sandboxes, network namespace files)
awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
  umount -l "$m" 2>/dev/null
done

# cgroups (every controller), deepest first
for root in /sys/fs/cgroup /sys/fs/cgroup/*; do
  [ -d "$root/$cgroup" ] || continue
  find "$root/$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null
done

ip netns delete "$netns" 2>/dev/null
[ -f "$dir/keep" ] || rm -rf "$dir"
exit 0
