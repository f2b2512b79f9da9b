//go:build linux

package main

// Delegates run by the shim (docs/archive/resident-protocol.md, "Delegates run by the shim"; the daemon's side is
// src/daemon/caller-exec.ts). The shim offers it with `X-Multus-Exec: 1` on its /cni request; a daemon with
// `"delegateExec": "caller"` then answers with a stream of JSON lines: `{"exec": {...}}` for each delegate the call
// needs, and last `{"status": N, "answer": <body>}`, the answer it would otherwise have sent as status N. Each exec
// runs here at once (a call's attachments may run in parallel), in the runtime's cgroup and the host's mount
// namespace, as the thin plugin runs its delegates, and what it did is posted to POST /cni/exec on a new
// connection to the same socket (its peer checked as for the call).
//
// The shim runs nothing but what its own call's daemon asks on the connection it checked: an absolute, clean path
// of an executable regular file, with no arguments, the environment and stdin given, in a process group of its
// own that is killed after the delegate timeout; the delegates die with the shim (Pdeathsig) and with the stream.

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
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	execHeader     = "X-Multus-Exec"
	maxStdout      = 2 * 1024 * 1024 // what the daemon's POST /cni/exec limit holds, in base64
	maxStderr      = 256 * 1024
	maxLine        = 8 * 1024 * 1024
	textBusyTries  = 5 // libcni's raw_exec.go: a plugin being replaced is briefly "text file busy"
	textBusyDelay  = time.Second
	pipeDrainGrace = 200 * time.Millisecond
)

type execRequest struct {
	Call      string            `json:"call"`
	ID        int64             `json:"id"`
	Path      string            `json:"path"`
	Env       map[string]string `json:"env"`
	Stdin     []byte            `json:"stdin"`
	TimeoutMs int64             `json:"timeoutMs"`
}

type execReply struct {
	Call     string  `json:"call"`
	ID       int64   `json:"id"`
	Stdout   []byte  `json:"stdout,omitempty"`
	Stderr   []byte  `json:"stderr,omitempty"`
	ExitCode *int    `json:"exitCode"`
	Signal   *string `json:"signal"`
	TimedOut bool    `json:"timedOut"`
	Error    string  `json:"error,omitempty"`
}

// running holds the process groups of the delegates started and not yet reaped, to kill when the call ends.
type running struct {
	mu     sync.Mutex
	groups map[int]bool
	wg     sync.WaitGroup
}

func (r *running) killAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pgid := range r.groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// serveStream runs the execs of a streamed answer and returns the final status and body; false when the stream
// ended without one (the daemon went away): every delegate still running is killed.
func serveStream(body io.Reader, sock string) (int, []byte, bool) {
	r := &running{groups: map[int]bool{}}
	defer r.killAll() // an exec the daemon no longer waits for has nobody to answer
	br := bufio.NewReaderSize(body, 64*1024)
	for {
		line, err := readLine(br)
		if err != nil {
			return 0, nil, false
		}
		var msg struct {
			Exec   *execRequest    `json:"exec"`
			Status int             `json:"status"`
			Answer json.RawMessage `json:"answer"`
		}
		if json.Unmarshal(line, &msg) != nil {
			return 0, nil, false
		}
		if msg.Exec == nil {
			if string(msg.Answer) == "null" {
				msg.Answer = nil
			}
			return msg.Status, msg.Answer, true
		}
		req := msg.Exec
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			postReply(sock, runDelegate(req, r))
		}()
	}
}

// readLine reads one line of at most maxLine bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		part, err := br.ReadSlice('\n')
		buf = append(buf, part...)
		if len(buf) > maxLine {
			return nil, errors.New("line too long")
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return buf, err
	}
}

// checkRequest says why the shim refuses to run req, or "".
func checkRequest(req *execRequest) string {
	p := req.Path
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsRune(p, 0) {
		return fmt.Sprintf("refused: %q is not an absolute, clean path", p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return err.Error()
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Sprintf("refused: %s is not an executable file", p)
	}
	if req.TimeoutMs <= 0 {
		return fmt.Sprintf("refused: timeout %d ms", req.TimeoutMs)
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Sprintf("refused: environment variable %q", k)
		}
	}
	return ""
}

// bounded keeps the first max bytes written and drops the rest (the delegate never blocks on it).
type bounded struct {
	buf bytes.Buffer
	max int
}

func (b *bounded) Write(p []byte) (int, error) {
	if left := b.max - b.buf.Len(); left > 0 {
		b.buf.Write(p[:min(left, len(p))])
	}
	return len(p), nil
}

// runDelegate runs one exec and says what it did.
func runDelegate(req *execRequest, r *running) execReply {
	reply := execReply{Call: req.Call, ID: req.ID}
	if why := checkRequest(req); why != "" {
		reply.Error = why
		return reply
	}
	env := make([]string, 0, len(req.Env))
	for k, v := range req.Env {
		env = append(env, k+"="+v)
	}
	stdout, stderr := &bounded{max: maxStdout}, &bounded{max: maxStderr}
	var cmd *exec.Cmd
	for try := 1; ; try++ {
		cmd = &exec.Cmd{
			Path: req.Path, Args: []string{req.Path}, Env: env,
			Stdin: bytes.NewReader(req.Stdin), Stdout: stdout, Stderr: stderr,
			// a group of its own, so a timeout kills what it started too; killed if the shim dies
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
			WaitDelay:   pipeDrainGrace, // a child it left holding the pipes does not hold the answer
		}
		r.mu.Lock()
		err := cmd.Start()
		if err == nil {
			r.groups[cmd.Process.Pid] = true
		}
		r.mu.Unlock()
		if err == nil {
			break
		}
		if errors.Is(err, syscall.ETXTBSY) && try < textBusyTries {
			time.Sleep(textBusyDelay)
			continue
		}
		reply.Error = err.Error()
		return reply
	}
	pid := cmd.Process.Pid
	var timedOut atomic.Bool
	// the call's whole answer is bounded by requestTimeout anyway
	timeout := time.Duration(min(req.TimeoutMs, requestTimeout.Milliseconds())) * time.Millisecond
	timer := time.AfterFunc(timeout, func() {
		timedOut.Store(true)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	})
	_ = cmd.Wait()
	timer.Stop()
	reply.TimedOut = timedOut.Load()
	r.mu.Lock()
	delete(r.groups, pid) // what it left running in its group is not ours to kill
	r.mu.Unlock()
	reply.Stdout, reply.Stderr = stdout.buf.Bytes(), stderr.buf.Bytes()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		name := signalName(ws.Signal())
		reply.Signal = &name
	} else {
		code := cmd.ProcessState.ExitCode()
		reply.ExitCode = &code
	}
	return reply
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
		syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
		syscall.SIGKILL: "SIGKILL", syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
		syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}

// postReply sends what an exec did to the daemon (POST /cni/exec on a new connection, its peer checked).
func postReply(sock string, reply execReply) {
	body, _ := json.Marshal(reply)
	conn, err := net.Dial("unix", sock)
	if err != nil {
		fmt.Fprintf(os.Stderr, "multus-shim: cannot answer exec %d: %v\n", reply.ID, err)
		return
	}
	defer conn.Close()
	if why := untrustedPeer(conn); why != "" {
		fmt.Fprintf(os.Stderr, "multus-shim: not answering exec %d: %s: %s\n", reply.ID, sock, why)
		return
	}
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req, _ := http.NewRequest(http.MethodPost, "http://multus-shim/cni/exec", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Close = true
	if err := req.Write(conn); err != nil {
		fmt.Fprintf(os.Stderr, "multus-shim: cannot answer exec %d: %v\n", reply.ID, err)
		return
	}
	if resp, err := http.ReadResponse(bufio.NewReader(conn), req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
}
