//go:build linux

package main

// `multus-shim --ready [--socket-dir DIR]`: the resident DaemonSet's readiness probe (docs/resident.md, "Readiness").
//
// A probe that starts the JavaScript executable (`multus --is-default-ready`) every 10 s cost the daemon's
// container a 35 MiB process and tens of ms of CPU each time, inside Multus' 100m / 50Mi. This asks the daemon
// instead, over its root-only socket (0600 in a 0700 directory; the peer is checked as for a call): GET /readyz,
// which the daemon answers from what it already knows: 200 once it serves the generated 00-multus.conf, the
// readiness indicator file exists and its informers have synced, 503 before, 500 while it drains after SIGTERM.
// Exit 0 and "ready" on 200; else exit 1 and why on stdout (the kubelet keeps a probe's output in the pod's
// events). Bad arguments exit 2. Nothing is read from stdin and no TCP port is opened.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// readyTimeout bounds the whole probe: a daemon held back by its CPU limit still answers within it.
const readyTimeout = 5 * time.Second

// readyMain runs the probe for args (after --ready) and exits.
func readyMain(args []string) {
	dir := defaultSocketDir
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case strings.HasPrefix(a, "--socket-dir="):
			dir = strings.TrimPrefix(a, "--socket-dir=")
		case a == "--socket-dir" && i+1 < len(args):
			i++
			dir = args[i]
		default:
			fmt.Fprintf(os.Stderr, "multus-shim --ready: unexpected argument %q: usage: multus-shim --ready [--socket-dir DIR]\n", a)
			os.Exit(2)
		}
	}
	if why := daemonReady(filepath.Join(dir, socketName)); why != "" {
		fmt.Println("not ready: " + why)
		os.Exit(1)
	}
	fmt.Println("ready")
	os.Exit(0)
}

// daemonReady asks the daemon on sock whether it is ready: "" when it is, else why not.
func daemonReady(sock string) string {
	conn, err := net.DialTimeout("unix", sock, readyTimeout)
	if err != nil {
		return fmt.Sprintf("no multus daemon on %s: %v", sock, err)
	}
	defer conn.Close()
	if why := untrustedPeer(conn); why != "" {
		return fmt.Sprintf("%s: %s", sock, why)
	}
	_ = conn.SetDeadline(time.Now().Add(readyTimeout))
	req, _ := http.NewRequest(http.MethodGet, "http://multus-shim/readyz", nil)
	req.Close = true
	if err := req.Write(conn); err != nil {
		return fmt.Sprintf("%s: %v", sock, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fmt.Sprintf("the multus daemon on %s did not answer: %v", sock, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64*1024))
	if resp.StatusCode == http.StatusOK {
		return ""
	}
	var e cniError
	if json.Unmarshal(body, &e) == nil && e.Msg != "" {
		return e.Msg
	}
	return fmt.Sprintf("the multus daemon on %s answered HTTP %d: %s", sock, resp.StatusCode, truncate(body))
}
