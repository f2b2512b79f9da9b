//go:build linux

package main

// The shim's bounded wait for the daemon's socket (docs/resident.md, "When the daemon is not there").
//
// After a node reboots, the runtime starts the pods' sandboxes, and so execs this shim, before the daemon's own
// container is up; a thin call for each of them then costs a JavaScript start-up on a node that is busiest
// exactly then. Multus' shim polls its daemon every 100 ms for up to 60 s before ADD/CHECK/GC/STATUS and then
// fails. This one polls the socket as often, for up to `shimWaitSeconds` (a key of the generated 00-multus.conf,
// default 30, 0 = no wait), for every command but VERSION, and falls back to the thin plugin when that runs out.
//
// A daemon that is really gone (crash-looping, or its DaemonSet removed while the config stays) must not cost
// every call the whole wait: the first shim whose wait runs out leaves a marker file beside the socket, and while
// it is there every shim that cannot connect falls back at once (one that is waiting gives up too). The daemon
// removes the marker as soon as it listens (src/daemon/socket.ts), and so does a shim that connects.

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

const (
	// GaveUpName is the marker beside the socket; src/daemon/socket.ts removes it by the same name.
	gaveUpName         = "multus.shim-gave-up"
	defaultWaitSeconds = 30
	maxWaitSeconds     = 600
	pollInterval       = 100 * time.Millisecond // Multus' APIReadyPollDuration
)

// waitBound is shimWaitSeconds of the config: absent (or not a number from 0 to 600) the default.
func waitBound(seconds *float64) time.Duration {
	if seconds == nil || *seconds < 0 || *seconds > maxWaitSeconds {
		return defaultWaitSeconds * time.Second
	}
	return time.Duration(*seconds * float64(time.Second))
}

// dialDaemon connects to the daemon's socket, waiting up to wait for it to accept. It returns the connection,
// or nil and why there is none (the shim then runs the thin plugin).
func dialDaemon(sock string, wait time.Duration) (net.Conn, string) {
	marker := filepath.Join(filepath.Dir(sock), gaveUpName)
	conn, err := net.Dial("unix", sock) // ENOENT, ECONNREFUSED, EACCES...
	if err == nil {
		_ = os.Remove(marker)
		return conn, ""
	}
	if wait <= 0 {
		return nil, fmt.Sprintf("daemon socket %s: %v", sock, err)
	}
	gaveUp := func() bool { _, e := os.Lstat(marker); return e == nil }
	if gaveUp() {
		return nil, fmt.Sprintf("daemon socket %s: %v (an earlier call waited for it in vain: %s)", sock, err, marker)
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		time.Sleep(pollInterval)
		if conn, err = net.Dial("unix", sock); err == nil {
			_ = os.Remove(marker)
			return conn, ""
		}
		if gaveUp() {
			return nil, fmt.Sprintf("daemon socket %s: %v (another call waited for it in vain: %s)", sock, err, marker)
		}
	}
	leaveMarker(marker, fmt.Sprintf("no multus daemon on %s after %s: %v\n", sock, wait, err))
	return nil, fmt.Sprintf("daemon socket %s: %v (waited %s)", sock, err, wait)
}

// leaveMarker writes the marker by temp file and rename, 0600, in the socket's directory (made 0700 as the
// daemon makes it, when a node came up without it); when it cannot be written the next call waits again.
func leaveMarker(marker, text string) {
	_ = os.MkdirAll(filepath.Dir(marker), 0o700)
	tmp := fmt.Sprintf("%s.%d.tmp", marker, os.Getpid())
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		return
	}
	if os.Rename(tmp, marker) != nil {
		_ = os.Remove(tmp)
	}
}
