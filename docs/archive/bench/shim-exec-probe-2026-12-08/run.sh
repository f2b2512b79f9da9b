#!/bin/bash
# The shim's own CPU per call, caller mode against daemon mode (probe.go). Args: rounds.
# Set-up (docs/archive/performance.md, 2026-12-08): each .go file built alone with the Go toolchain
# (CGO_ENABLED=0 go build noop.go -> /tmp/shimprobe/bin/noop, probe.go -> /tmp/shimprobe/probe), and build/multus
# and build/multus-shim copied to /tmp/shimprobe/. Root: it adds a network namespace and starts two daemons.
set -e
P=/tmp/shimprobe
rounds=${1:-200}
unset NODE_OPTIONS NODE_EXTRA_CA_CERTS
ip netns add mts-shimprobe 2>/dev/null || true
pids=()
for m in caller daemon; do
  rm -rf $P/$m; mkdir -p $P/$m/run $P/$m/net.d $P/$m/cache
  cat > $P/$m/daemon.json <<J
{"socketDir": "$P/$m/run", "cniConfigDir": "$P/$m/net.d", "logLevel": "error", "logToStderr": true, "delegateExec": "$m"}
J
  cat > $P/$m/conf.json <<J
{"cniVersion": "1.0.0", "name": "multus-cni-network", "type": "multus-shim", "daemonSocketDir": "$P/$m/run", "shimWaitSeconds": 0,
 "cniDir": "$P/$m/cache", "binDir": "$P/bin",
 "delegates": [{"cniVersion": "1.0.0", "name": "cluster", "type": "noop"}, {"cniVersion": "1.0.0", "name": "second", "type": "noop"}]}
J
  env -i PATH=/usr/bin:/bin $P/multus daemon --config $P/$m/daemon.json 2> $P/$m/daemon.log &
  pids+=($!)
done
for m in caller daemon; do for i in $(seq 100); do [ -S $P/$m/run/multus.sock ] && break; sleep 0.1; done; done
sleep 2
# the daemon process: the launcher execs the Bun executable in place, so the PID is the daemon's
$P/probe $P/multus-shim $P/bin/noop /var/run/netns/mts-shimprobe "$rounds" $P/caller/conf.json $P/daemon/conf.json ${pids[0]} ${pids[1]}
kill ${pids[@]}; wait || true
ip netns del mts-shimprobe
