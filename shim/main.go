//go:build linux

// multus-shim: the executable a container runtime runs for multus-ts' resident mode. It forwards one CNI call
// to the multus-ts daemon over <daemonSocketDir>/multus.sock with Multus thick's wire format (POST /cni, body
// {"env": {...}, "config": <stdin, base64>}; see docs/archive/resident-protocol.md) and prints the answer. It holds no
// CNI logic of its own.
//
// Where it differs from Multus v4.3.0's multus-shim, on purpose:
//   - Multus' shim polls /healthz for up to 60 s before ADD/CHECK/GC/STATUS and fails when the daemon is down,
//     and it turns every DEL error (daemon down, delegate failed) into success, which leaks IPs and
//     interfaces. This shim waits, bounded, for a daemon that is not there yet (dialDaemon: after a reboot the
//     daemon starts after the runtime), then, when the daemon still cannot be reached (socket missing, refused,
//     no permission), it execs the thin plugin `multus` from its own directory, which does the same work
//     in-process; a DEL error is reported as an error, so the runtime retries it.
//   - Once a request was written to the socket it never falls back: a daemon that closes the connection, times
//     out or answers garbage is an error (code 999), so no call ever runs twice.
//   - A CNI error from the daemon is printed as it came (its code kept); Multus' shim re-wraps it as code 999.
//   - It polls neither /healthz nor /readyz (Multus HEAD's shim polls /readyz): a daemon that drains after SIGTERM
//     (/readyz 500) still runs what it is sent, and once its socket refuses or is gone the thin fallback runs.
//   - VERSION is not sent to the daemon: the thin plugin answers it (it owns the list of supported versions).
//   - The Result is printed as the daemon serialized it: the daemon must answer in the config's cniVersion.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const (
	defaultSocketDir = "/run/multus/" // Multus' default for daemonSocketDir
	socketName       = "multus.sock"
	thinName         = "multus"
	// Multus' shim sets no timeout at all. Kubelet's runtime request timeout (2 min by default) normally ends a
	// slow call first (the runtime kills this process); this deadline only keeps a shim that nobody kills from
	// waiting forever on a hung daemon. Delegate timeouts are the daemon's business.
	requestTimeout = 5 * time.Minute
)

type cniError struct {
	CNIVersion string `json:"cniVersion,omitempty"`
	Code       uint   `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details,omitempty"`
}

var cniVersion string // from the stdin config, for our own error objects

// fail prints a CNI error on stdout and exits 1.
func fail(code uint, msg, details string) {
	b, _ := json.Marshal(cniError{CNIVersion: cniVersion, Code: code, Msg: msg, Details: details})
	os.Stdout.Write(append(b, '\n'))
	os.Exit(1)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "--ready" {
		readyMain(os.Args[2:]) // the DaemonSet's readiness probe (readyMain below), not a CNI call
	}
	stdin := readStdin()
	// Only daemonSocketDir (and cniVersion, for errors) are read here. A config that is not JSON is not our
	// business: the daemon (or the thin plugin) reports it with its own error.
	var conf struct {
		CNIVersion      string   `json:"cniVersion"`
		DaemonSocketDir string   `json:"daemonSocketDir"`
		ShimWaitSeconds *float64 `json:"shimWaitSeconds"`
	}
	_ = json.Unmarshal(stdin, &conf)
	cniVersion = conf.CNIVersion
	dir := conf.DaemonSocketDir
	if dir == "" {
		dir = defaultSocketDir
	}
	sock := filepath.Join(dir, socketName)

	if os.Getenv("CNI_COMMAND") == "VERSION" {
		execThin(stdin, "")
	}
	conn, why := dialDaemon(sock, waitBound(conf.ShimWaitSeconds))
	if conn == nil {
		execThin(stdin, why) // nothing was sent yet
	}
	if why := untrustedPeer(conn); why != "" {
		// not the daemon: nothing is sent to it (the environment is root's), its answer is never read
		conn.Close()
		fmt.Fprintf(os.Stderr, "multus-shim: %s: %s; running the thin plugin\n", sock, why)
		execThin(stdin, fmt.Sprintf("daemon socket %s: %s", sock, why))
	}
	forward(conn, sock, stdin)
}

// An endless stdin must end in an answer, not in the OOM killer (docs/reliability.md). thinMaxStdin is what the
// thin plugin reads at most (src/cni/request.ts MAX_STDIN_BYTES); the shim reads up to shimMaxStdin, so that a
// config the daemon refuses (its body limit, 413 code 7) gets the daemon's answer.
const (
	thinMaxStdin = 1024 * 1024
	shimMaxStdin = 4 * thinMaxStdin
)

// readStdin reads the network config, at most shimMaxStdin: a longer one is refused (code 6) unread.
func readStdin() []byte {
	stdin, err := io.ReadAll(io.LimitReader(os.Stdin, shimMaxStdin+1))
	if err != nil {
		fail(5, "multus-shim: error reading from stdin", err.Error()) // 5: CNI "I/O failure"
	}
	if len(stdin) > shimMaxStdin {
		stdinTooLarge(shimMaxStdin)
	}
	return stdin
}

func stdinTooLarge(limit int) {
	fail(6, fmt.Sprintf("the network config on stdin is larger than %d bytes", limit),
		"a CNI network config is a JSON object of a few KiB: check what the runtime passes on stdin")
}

// forward sends the call to the daemon on conn and prints its answer. From here on there is no fallback.
func forward(conn net.Conn, sock string, stdin []byte) {
	// Like Multus' shim: the whole environment (the daemon reads CNI_* and may read more), config as bytes.
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if i := strings.IndexByte(kv, '='); i > 0 {
			env[strings.TrimSpace(kv[:i])] = kv[i+1:]
		}
	}
	body, _ := json.Marshal(struct {
		Env    map[string]string `json:"env,omitempty"`
		Config []byte            `json:"config,omitempty"`
	}{env, stdin})

	_ = conn.SetDeadline(time.Now().Add(requestTimeout))
	req, _ := http.NewRequest(http.MethodPost, "http://multus-shim/cni", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(execHeader, "1") // it may run the call's delegates (delegates.go)
	req.Close = true
	notAnswered := func(err error) {
		fail(999, "multus-shim: the multus daemon did not answer", fmt.Sprintf("%s: %v", sock, err))
	}
	// Written by hand on the connection we dialled: http.Client could dial again, and must not. A daemon that
	// refuses the request before reading all of it (413: body over its limit) answers and closes: the write then
	// fails (EPIPE), and its answer is still there to read.
	writeErr := req.Write(conn)
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		if writeErr != nil {
			err = writeErr
		}
		notAnswered(err)
	}
	status := resp.StatusCode
	var answer []byte
	if resp.Header.Get(execHeader) == "1" {
		// a streamed answer: the delegates the daemon asks for, then its answer (delegates.go), all within the
		// connection's deadline
		var ok bool
		status, answer, ok = serveStream(resp.Body, sock)
		if !ok {
			notAnswered(errors.New("the answer stream ended before the call's answer"))
		}
	} else if answer, err = io.ReadAll(resp.Body); err != nil {
		notAnswered(err)
	}
	conn.Close()

	if status != http.StatusOK {
		var e cniError
		if json.Unmarshal(answer, &e) == nil && e.Msg != "" {
			os.Stdout.Write(answer) // a CNI error: as it came, code included
			os.Exit(1)
		}
		fail(999, strings.TrimSpace(string(answer)), fmt.Sprintf("multus daemon at %s answered HTTP %d", sock, status))
	}
	if len(bytes.TrimSpace(answer)) == 0 {
		os.Exit(0) // DEL, CHECK, GC, STATUS: nothing to print
	}
	var r struct{ Result json.RawMessage }
	if err := json.Unmarshal(answer, &r); err != nil {
		fail(999, "multus-shim: the multus daemon's answer is not JSON",
			fmt.Sprintf("%s: %v: %q", sock, err, truncate(answer)))
	}
	if len(r.Result) > 0 && string(r.Result) != "null" {
		os.Stdout.Write(append(r.Result, '\n'))
	}
	os.Exit(0)
}

// execThin replaces this process with the thin plugin next to it (same argv, environment and stdin bytes).
// why is "" for VERSION, else the reason the daemon is not used.
func execThin(stdin []byte, why string) {
	self, err := os.Executable()
	if err != nil {
		fail(999, "multus-shim: cannot find its own executable", err.Error())
	}
	thin := filepath.Join(filepath.Dir(self), thinName)
	if _, err := os.Stat(thin); err != nil {
		if why == "" {
			why = "VERSION is answered by the thin plugin"
		}
		// 11 "try again later": the daemon may be (re)starting.
		fail(11, "multus-shim: neither the multus daemon nor the thin plugin is available",
			fmt.Sprintf("%s; thin plugin %s: %v", why, thin, err))
	}
	if len(stdin) > thinMaxStdin {
		stdinTooLarge(thinMaxStdin) // the thin plugin's own answer, without a pipe that cannot hold it
	}
	if err := stdinPipe(stdin); err != nil {
		fail(999, "multus-shim: cannot pass stdin to the thin plugin", err.Error())
	}
	argv := append([]string{thin}, os.Args[1:]...)
	err = syscall.Exec(thin, argv, os.Environ())
	fail(999, "multus-shim: cannot exec the thin plugin", fmt.Sprintf("%s: %v", thin, err))
}

// stdinPipe makes fd 0 a pipe holding data (then EOF), for the exec'd program: stdin was already consumed.
func stdinPipe(data []byte) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	// The whole config must fit the pipe's buffer (64 KiB by default), as nobody reads it before the exec.
	size, _, e := syscall.Syscall(syscall.SYS_FCNTL, w.Fd(), syscall.F_GETPIPE_SZ, 0)
	if e == 0 && int(size) < len(data) {
		if _, _, e = syscall.Syscall(syscall.SYS_FCNTL, w.Fd(), syscall.F_SETPIPE_SZ, uintptr(len(data))); e != 0 {
			return fmt.Errorf("config of %d bytes does not fit a pipe: %v", len(data), e)
		}
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	w.Close()
	return errors.Join(syscall.Dup3(int(r.Fd()), 0, 0), r.Close()) // fd 0 without close-on-exec
}

// untrustedPeer says why the process at the other end of conn is not the daemon, or "" when it runs as root or as
// this shim's user (SO_PEERCRED, set by the kernel at connect time): a socket planted in a directory others can
// write to must not get the call (issue 28, docs/resident.md).
func untrustedPeer(conn net.Conn) string {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return "not a unix socket"
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return "cannot read the peer's credentials: " + err.Error()
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		credErr = err
	}
	if credErr != nil {
		return "cannot read the peer's credentials: " + credErr.Error()
	}
	if cred.Uid != 0 && int(cred.Uid) != os.Geteuid() {
		return fmt.Sprintf("its listener (pid %d) runs as uid %d, not root: it is not the multus daemon", cred.Pid, cred.Uid)
	}
	return ""
}

func truncate(b []byte) string {
	if len(b) > 512 {
		return string(b[:512]) + "..."
	}
	return string(b)
}

// `multus-shim --ready [--socket-dir DIR]`: the resident DaemonSet's readiness probe (docs/resident.md, "Readiness").
//
// A probe that starts the JavaScript executable (`multus --is-default-ready`) every 10 s cost the daemon's
// container a 35 MiB process and tens of ms of CPU each time, inside Multus' 100m / 50Mi. This asks the daemon
// instead, over its root-only socket (0600 in a 0700 directory; the peer is checked as for a call): GET
// /readyz?config, which the daemon answers from what it already knows: 200 once it serves 00-multus.conf, the
// readiness indicator file exists and its informers have synced, 503 before, 500 while it drains after SIGTERM.
// Exit 0 and "ready" on 200; else exit 1 and why on stdout (the kubelet keeps a probe's output in the pod's
// events). Bad arguments exit 2. Nothing is read from stdin and no TCP port is opened.

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
	req, _ := http.NewRequest(http.MethodGet, "http://multus-shim/readyz?config", nil)
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
