//go:build linux

package main

// The launcher's file is the launcher (a Go ELF) followed by the Bun executable and a trailer, so that one file
// is the whole program: a copy of `multus` alone (`cp`, as Multus' manifests do) works (docs/build.md, "The
// launcher"). Where the Bun executable it execs comes from, in order:
//
//  1. <its directory>/.multus-bun-<payloadID>, if checkPayload passes: checked on a descriptor opened O_PATH and
//     O_NOFOLLOW, and that descriptor is what is exec'd (execveat), so no other file can take its place between;
//  2. written there from this file first, under an exclusive flock(2) of <its directory>/.multus-bun.lock, so that
//     concurrent first runs write it once (the others wait, then find it): a temp file, SHA-256 checked, renamed;
//  3. a copy in memory (memfd_create) for this call alone, when the directory takes no file (read-only, not
//     root's) or this file is no longer the one at its path (an upgrade replaced it).
//
// The launcher never removes a .multus-bun-* file: another build's launcher in the same directory may run it.
// `multus install` removes those no launcher there carries (src/install/payloads.ts).
//
// Trailer (the file's last 64 bytes): offset u64 LE | size u64 LE | SHA-256 of the payload (32) | trailerMagic (16).

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

const (
	// posix_fadvise's POSIX_FADV_DONTNEED
	posixFadvDontneed = 4
	trailerSize       = 64
	trailerMagic      = "multus-ts-bun\x00\x00\x01"
	// the lock of first runs in a directory (0600, never removed: flock(2) locks the file, not its name)
	lockName    = ".multus-bun.lock"
	oPath       = 0x200000 // O_PATH (the same on amd64 and arm64)
	atEmptyPath = 0x1000
	mfdCloexec  = 1
	mfdExec     = 0x10 // Linux 6.3+: say the memfd is to be exec'd (vm.memfd_noexec)
)

// payloadSize is the Bun executable's size in bytes as 16 hex digits, set by the build with payloadID: a file of
// another size at the payload's path is not it (checkPayload; the fast path reads it too).
var payloadSize = "unset"

// carried is the Bun executable inside this launcher's file.
type carried struct {
	f            *os.File
	offset, size int64
	sum          []byte
}

// damaged is an error of the launcher's own file: extracting again elsewhere would fail the same way.
type damaged string

func (d damaged) Error() string { return string(d) }

// payloadFd is a descriptor of the Bun executable to exec, found, written or copied into memory as above.
func payloadFd(self, path string) (int, error) {
	owner := launcherOwner()
	if fd := openPayload(path, owner); fd >= 0 {
		return fd, nil
	}
	c, err := openCarried(self)
	if err != nil {
		return -1, err
	}
	defer c.f.Close()
	if !replaced() {
		if lock := lockDir(filepath.Dir(path)); lock >= 0 {
			defer syscall.Close(lock)
			// another first run may have written it while this one waited
			if fd := openPayload(path, owner); fd >= 0 {
				return fd, nil
			}
			err := c.extractTo(path)
			if err == nil {
				if fd := openPayload(path, owner); fd >= 0 {
					return fd, nil
				}
			}
			if _, ok := err.(damaged); ok {
				return -1, err
			}
		}
	}
	return c.memfd()
}

// openPayload is a descriptor of path when it is a file the launcher may run as the Bun executable, else -1.
func openPayload(path string, owner uint32) int {
	fd, err := syscall.Open(path, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || !checkPayload(&st, owner) {
		syscall.Close(fd)
		return -1
	}
	return fd
}

// checkPayload: a regular file of the carried size, executable by its owner, which is root, the launcher file's
// owner or this process's user (none of whom gains by running it), and writable by no one else. Cheap: the
// SHA-256 is checked when a file is written, not per call (docs/build.md, "The launcher").
func checkPayload(st *syscall.Stat_t, owner uint32) bool {
	return st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Mode&0o022 == 0 && st.Mode&0o100 != 0 &&
		st.Size == wantSize() && (st.Uid == 0 || st.Uid == owner || st.Uid == uint32(os.Geteuid()))
}

func wantSize() int64 {
	n, err := strconv.ParseUint(payloadSize, 16, 63)
	if err != nil || len(payloadSize) != 16 {
		return -1
	}
	return int64(n)
}

// launcherOwner is the owner of the file this process runs (root's when it cannot be read).
func launcherOwner() uint32 {
	var st syscall.Stat_t
	if syscall.Stat("/proc/self/exe", &st) != nil {
		return 0
	}
	return st.Uid
}

// replaced: this process's file is no longer at its path (an upgrade renamed another over it): it must not write
// its Bun executable there, where no launcher would run it and nothing would remove it.
func replaced() bool {
	target, err := os.Readlink("/proc/self/exe")
	return err == nil && strings.HasSuffix(target, " (deleted)")
}

// lockDir takes the exclusive lock of first runs in dir (waiting for another's), or -1 when it cannot: the
// directory takes no file, or the lock file is not this user's or root's (then whoever made it could hold every
// first run back). The descriptor is close-on-exec: the lock goes when the Bun executable starts, at the latest.
func lockDir(dir string) int {
	fd, err := syscall.Open(filepath.Join(dir, lockName), syscall.O_RDWR|syscall.O_CREAT|syscall.O_NOFOLLOW|
		syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return -1
	}
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG ||
		(st.Uid != 0 && st.Uid != uint32(os.Geteuid())) {
		syscall.Close(fd)
		return -1
	}
	for {
		err = syscall.Flock(fd, syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		return -1
	}
	return fd
}

// openCarried reads the trailer of the file this process runs (also when an upgrade renamed a new build over
// its path).
func openCarried(self string) (*carried, error) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		f, err = os.Open(self)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	trailer := make([]byte, trailerSize)
	if st.Size() < trailerSize {
		err = damaged(self + " carries no Bun executable (rebuild with npm run build)")
	} else if _, err = f.ReadAt(trailer, st.Size()-trailerSize); err == nil && string(trailer[48:]) != trailerMagic {
		err = damaged(self + " carries no Bun executable (rebuild with npm run build)")
	}
	c := &carried{f: f, offset: int64(le64(trailer[0:8])), size: int64(le64(trailer[8:16])), sum: trailer[16:48]}
	if err == nil && c.offset == 0 {
		// the launcher alone (build/multus.launcher), as the image stores it beside its Bun executable
		err = damaged(self + " is the launcher alone: its Bun executable " + payloadPrefix + payloadID +
			" belongs beside it (install_multus and multus install copy both)")
	}
	if err == nil && (hexString(c.sum[:8]) != payloadID || c.size != wantSize() || c.offset < 0 || c.size <= 0 ||
		c.offset+c.size > st.Size()-trailerSize) {
		err = damaged(self + ": its trailer does not match its launcher (id " + payloadID + "): the file is damaged")
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// copyTo writes the Bun executable to w, checking its SHA-256.
func (c *carried) copyTo(w io.Writer) error {
	h := sha256.New()
	// 64 KiB writes: the page cache keeps the copy in 64 KiB folios (extractTo)
	_, err := io.CopyBuffer(io.MultiWriter(w, h), io.NewSectionReader(c.f, c.offset, c.size), make([]byte, 64<<10))
	if err == nil && !bytes.Equal(h.Sum(nil), c.sum) {
		err = damaged("the Bun executable in " + c.f.Name() + " does not match its checksum: the file is damaged")
	}
	return err
}

// extractTo writes the Bun executable to dest (through dest.tmp, which only the lock's holder writes).
func (c *carried) extractTo(dest string) error {
	tmp := dest + ".tmp"
	syscall.Unlink(tmp) // a killed first run's
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o700)
	if err != nil {
		return err
	}
	err = c.copyTo(out)
	if err == nil {
		err = out.Chmod(0o755)
	}
	if err == nil {
		err = out.Sync()
	}
	if err == nil {
		// The copy stays in the page cache as it was written, in 64 KiB folios: a call's fault maps one of them,
		// as many bytes as from disk and faster, the build having aligned the segments to 64 KiB
		// (docs/performance.md, "The installed copy kept in the page cache"). The payload's part of this file
		// leaves it (best effort): readahead cached it in large folios, and no call runs it from here.
		syscall.Syscall6(syscall.SYS_FADVISE64, c.f.Fd(), uintptr(c.offset), uintptr(c.size), posixFadvDontneed, 0, 0)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dest)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// memfd is a copy of the Bun executable in memory, for this call: its ~157 MiB are read, checked and held while
// the call runs (docs/build.md, "The launcher").
func (c *carried) memfd() (int, error) {
	name := []byte("multus-bun\x00")
	fd, _, e := syscall.RawSyscall(sysMemfdCreate, uintptr(unsafe.Pointer(&name[0])), mfdCloexec|mfdExec, 0)
	if e == syscall.EINVAL { // before Linux 6.3
		fd, _, e = syscall.RawSyscall(sysMemfdCreate, uintptr(unsafe.Pointer(&name[0])), mfdCloexec, 0)
	}
	if e != 0 {
		return -1, errors.New("the directory takes no file, and memfd_create: " + e.Error())
	}
	if err := c.copyTo(fdWriter(fd)); err != nil {
		syscall.Close(int(fd))
		return -1, err
	}
	return int(fd), nil
}

// fdWriter writes to a descriptor (an os.File would close it when collected).
type fdWriter int

func (w fdWriter) Write(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := syscall.Write(int(w), b[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		n += m
	}
	return n, nil
}

// execFd execs the file fd is open on, with argv and env (execveat with AT_EMPTY_PATH: the checked file itself);
// it returns only on failure.
func execFd(fd int, argv, env []string) error {
	argvp, err := syscall.SlicePtrFromStrings(argv)
	if err != nil {
		return err
	}
	envp, err := syscall.SlicePtrFromStrings(env)
	if err != nil {
		return err
	}
	empty := []byte{0}
	_, _, e := syscall.RawSyscall6(sysExecveat, uintptr(fd), uintptr(unsafe.Pointer(&empty[0])),
		uintptr(unsafe.Pointer(&argvp[0])), uintptr(unsafe.Pointer(&envp[0])), atEmptyPath, 0)
	if e == syscall.ENOSYS {
		// no execveat: qemu-user (Debian 12's), which runs the arm64 build on x64 (docs/build.md, "arm64"), and
		// whose binfmt handler cannot open a /proc/self/fd link the exec closed. The path the descriptor names.
		if path, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil && strings.HasPrefix(path, "/") {
			return syscall.Exec(path, argv, env)
		}
	}
	return e
}

// le64 decodes a little-endian uint64 (encoding/binary and encoding/hex would pull fmt and reflect into the build).
func le64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// hexString is b in lower-case hex digits.
func hexString(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
