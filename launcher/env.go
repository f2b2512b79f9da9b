//go:build linux

package main

// The environment main() gives the Bun executable (main.go): every caller variable held under heldPrefix, then
// the launcher's own. syscall.Environ has already dropped empty entries and every later copy of a name (a map:
// linear in the number of variables, docs/build.md "The launcher").
//
// A variable the runtime could pass is at most maxArgStrlen-1 bytes long (the kernel's MAX_ARG_STRLEN counts the
// NUL), and heldPrefix makes it 15 bytes longer: one of the last 15 sizes would fail the exec (E2BIG) where Go
// Multus answers. Such a variable is held in two parts: MULTUS_TS_HELD_NAME=<start of the value> and
// MULTUS_TS_MORE_NAME=<the rest> (cut where no UTF-8 sequence is split); src/base/caller-env.ts joins them.

import (
	"strconv"
	"strings"
)

const (
	morePrefix = "MULTUS_TS_MORE_"
	// the kernel's MAX_ARG_STRLEN (32 pages of 4 KiB): the longest string exec carries, its NUL included
	maxArgStrlen = 32 * 4096
)

// launcherEnv is the environment of the Bun executable for the caller's variables `caller` (syscall.Environ).
func launcherEnv(caller []string, self, role string) ([]string, error) {
	env := make([]string, 0, len(caller)+6)
	for _, kv := range caller {
		held, more, ok := holdVar(kv)
		if !ok {
			return nil, tooLarge(kv)
		}
		env = append(env, held)
		if more != "" {
			env = append(env, more)
		}
	}
	env = append(env, launcherVar+"="+self)
	return append(env, roleEnv[role]...), nil
}

// holdVar is kv held (and its rest, when it must be cut in two); false when even two parts cannot carry it.
func holdVar(kv string) (held, more string, ok bool) {
	held = heldPrefix + kv
	if len(held) < maxArgStrlen {
		return held, "", true
	}
	eq := strings.IndexByte(kv, '=')
	if eq < 0 {
		return "", "", false
	}
	cut := maxArgStrlen - 1 - len(heldPrefix)
	// not inside a UTF-8 sequence: back to a byte that starts one (at most 3 steps in valid UTF-8)
	for back := 0; back < 3 && cut > eq+1 && kv[cut]&0xc0 == 0x80; back++ {
		cut--
	}
	if cut <= eq {
		return "", "", false
	}
	more = morePrefix + kv[:eq+1] + kv[cut:]
	if len(more) >= maxArgStrlen {
		return "", "", false
	}
	return heldPrefix + kv[:cut], more, true
}

// tooLarge says which variable exec cannot carry (a name of about 128 KiB: no runtime sets one).
func tooLarge(kv string) error {
	name, _, _ := strings.Cut(kv, "=")
	size := strconv.Itoa(len(name))
	if len(name) > 64 {
		name = name[:64] + "..."
	}
	return envError("the environment variable " + name + " is too large to pass on (its name is " + size +
		" bytes): shorten it")
}

type envError string

func (e envError) Error() string { return string(e) }
