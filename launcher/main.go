//go:build linux

// multus: the launcher of multus-ts (build/multus, installed as /opt/cni/bin/multus). It is what a container
// runtime execs; it starts the Bun executable beside it (.multus-bun-<id>, which it carries in its own file and
// extracts there on its first run, payload.go) with an environment in which the Bun runtime finds none of the
// caller's variables, so that nothing in the runtime's environment can change what
// Bun does before our code runs (docs/build.md, "The launcher"):
//
//   - BUN_OPTIONS (--preload, --config, --version, --help, --print, ...), BUN_INSPECT*, BUN_BE_BUN, BUN_JSC_*,
//     BUN_CONFIG_*, BUN_FEATURE_FLAG_*, NODE_TLS_REJECT_UNAUTHORIZED, NODE_EXTRA_CA_CERTS, MIMALLOC_*, the
//     dynamic loader's LD_* and GLIBC_TUNABLES, and every variable a later Bun may read: the Bun runtime reads
//     them before the first line of JavaScript, so no check in JavaScript could come early enough.
//   - Every caller variable NAME=value is passed on as MULTUS_TS_HELD_NAME=value (bytes unchanged). Bun reads
//     no variable of that prefix; multus-ts' JavaScript restores the caller's environment from them
//     (src/base/caller-env.ts) for its own reading (CNI_*, KUBERNETES_SERVICE_*, ...) and for its delegates,
//     which get exactly the environment the runtime gave.
//   - MULTUS_TS_LAUNCHER=<this executable> tells the JavaScript that it was started this way, and where the
//     launcher is (`multus install` copies it).
//   - roleEnv: variables the executable itself gives the Bun runtime for a role (never the caller's).
//
// argv (argv[0] included, so role dispatch by name keeps working) and stdin are passed unchanged; the launcher
// reads nothing else. Standard library only, statically linked; it costs one exec per call (docs/performance.md).
package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"unicode/utf8"
)

const (
	payloadPrefix = ".multus-bun-"
	heldPrefix    = "MULTUS_TS_HELD_"
	launcherVar   = "MULTUS_TS_LAUNCHER"
	// pluginJSC and pluginMalloc are the CNI plugin's runtime settings (roleEnv), also given by the fast path
	// (fastpath.go).
	pluginJSC    = "BUN_JSC_useJIT=0"
	pluginMalloc = "MIMALLOC_PURGE_DELAY=-1"
)

// payloadID names the Bun executable this launcher carries (the first 16 hex digits of its SHA-256), set by the
// build (-X main.payloadID=...): the launcher starts <its directory>/.multus-bun-<payloadID>, extracting it from
// its own file first when it is not there (payload.go).
var payloadID = "unset"

// roleEnv holds the runtime settings the executable sets for its own roles (e.g. a JavaScriptCore heap option for
// the daemon as BUN_JSC_<option>=<value>). The caller cannot add to them: its variables are all held.
//
// The CNI plugin (and passthru) serves one call of ~10-40 ms: without the JIT, JavaScriptCore neither sets up its
// JIT nor compiles anything, which saves such a call more CPU and memory than any compiled code would win back
// (docs/performance.md, "The thin plugin without the JIT"). Bun's FFI needs the JIT: the plugin uses none.
// Nor does it give freed memory back while it runs: mimalloc, Bun's allocator for its native memory, would start a
// thread for that ("mi-scavenger") once a delegate has exited and hand back pages the call then faults in again,
// about 0.9 ms of a DEL's CPU; the process's memory goes back when it exits, a few ms later (docs/performance.md,
// "No allocator thread in a call").
//
// The daemon runs its JavaScript in JavaScriptCore's interpreter too, with the JIT set up (its FFI needs that) but
// none of the compiling tiers: a request's own JavaScript is a small part of its cost, and the compilers' work and
// memory cost more than compiled code won back. Measured side by side: less CPU under a stream of requests (10
// pairs a second: 162-165 against 183-193 ms a second), a third less anonymous memory under it, fewer of the
// executable's pages mapped, a lower burst high-water (docs/performance.md, "The daemon without the compilers").
var roleEnv = map[string][]string{
	"daemon": {"BUN_JSC_useBaselineJIT=0", "BUN_JSC_useDFGJIT=0", "BUN_JSC_useFTLJIT=0", "BUN_JSC_useRegExpJIT=0"},
	"plugin": {pluginJSC, pluginMalloc},
}

// chrootName is the name under which the launcher runs a delegate inside another root for the resident daemon
// (`chrootDir`, src/daemon/exec.ts): argv is [chrootName, root, plugin, args...]; it calls chroot(2) and chdir("/"),
// then execs the plugin (its path inside the root) with argv[2:] and the environment unchanged, as chroot(8) does,
// but in the one exec: chroot(8) is a glibc program whose own start costs a delegate call about 0.6 ms of CPU
// (docs/performance.md, "The daemon's delegates without chroot(8)"). The fast path (fastpath_amd64.s) does it before
// the Go runtime starts; this is the rest, with chroot(8)'s exit codes: 125 when the root cannot be entered, 126
// when the plugin cannot be run, 127 when it is not there.
const chrootName = "multus-chroot"

// longRunningNames are the names of Multus' programs the executable also serves (install/entrypoints.ts). An
// array of constants, so that it is static data the fast path can read (fastpath.go).
var longRunningNames = [3]string{"multus-daemon", "thin_entrypoint", "install_multus"}

func longRunning(name string) bool {
	for _, n := range longRunningNames {
		if name == n {
			return true
		}
	}
	return false
}

func main() {
	if len(os.Args) > 0 && filepath.Base(os.Args[0]) == chrootName {
		chrootRun(os.Args[1:])
	}
	self, err := os.Executable()
	if err != nil {
		fail("multus-ts: cannot find its own executable (is /proc mounted?)", err.Error())
	}
	payload := filepath.Join(filepath.Dir(self), payloadPrefix+payloadID)
	env, err := launcherEnv(syscall.Environ(), self, role(os.Args))
	if err != nil {
		failCode(4, "multus-ts: cannot pass the caller's environment on", err.Error())
	}
	fd, err := payloadFd(self, payload)
	if err != nil {
		fail("multus-ts: cannot extract its Bun executable to "+payload, err.Error())
	}
	err = execFd(fd, os.Args, env)
	if err == syscall.E2BIG {
		failCode(4, "multus-ts: the caller's environment is too large to pass on", err.Error())
	}
	fail("multus-ts: cannot start "+payload, err.Error())
}

// chrootRun runs args[1] inside the root args[0] (chrootName); it never returns.
func chrootRun(args []string) {
	if len(args) < 2 {
		chrootFail(125, "usage: "+chrootName+" ROOT PLUGIN [ARG]...", nil)
	}
	if err := syscall.Chroot(args[0]); err != nil {
		chrootFail(125, "cannot change root directory to "+args[0], err)
	}
	if err := syscall.Chdir("/"); err != nil {
		chrootFail(125, "cannot change directory to / in "+args[0], err)
	}
	err := syscall.Exec(args[1], args[1:], syscall.Environ())
	code := 126
	if err == syscall.ENOENT {
		code = 127
	}
	chrootFail(code, "cannot run "+args[1]+" in "+args[0], err)
}

// chrootFail says why on stderr (what the daemon reports of a delegate that failed) and exits with code.
func chrootFail(code int, msg string, err error) {
	if err != nil {
		msg += ": " + err.Error()
	}
	os.Stderr.WriteString(chrootName + ": " + msg + "\n")
	os.Exit(code)
}

// role names the role the arguments ask for: the daemon is `multus daemon ...`; the CNI plugin (or passthru) is
// run with no arguments, as a runtime runs it, under any name but those of Multus' other programs.
func role(args []string) string {
	if len(args) > 1 && args[1] == "daemon" {
		return "daemon"
	}
	if len(args) > 0 && filepath.Base(args[0]) == "multus-daemon" {
		return "daemon"
	}
	if len(args) == 1 && !longRunning(filepath.Base(args[0])) {
		return "plugin"
	}
	return ""
}

// fail prints a CNI error (code 999) on stdout and exits 1; stdin is not read, so the config's version is unknown.
func fail(msg, details string) {
	failCode(999, msg, details)
}

// failCode prints a CNI error with code on stdout and exits 1.
func failCode(code int, msg, details string) {
	os.Stdout.WriteString(`{"cniVersion":"1.1.0","code":` + strconv.Itoa(code) + `,"msg":` + jsonString(msg) +
		`,"details":` + jsonString(details) + "}\n")
	os.Exit(1)
}

// jsonString quotes s as a JSON string (bytes that are not UTF-8 become U+FFFD).
func jsonString(s string) string {
	const hex = "0123456789abcdef"
	b := []byte{'"'}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&15])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return string(append(b, '"'))
}
