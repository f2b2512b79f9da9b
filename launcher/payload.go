//go:build linux

package main

// The launcher's file is the launcher (a Go ELF) followed by the Bun executable and a trailer, so that one file
// is the whole program: a copy of `multus` alone (`cp`, as Multus' manifests do) works. On the first run in a
// directory the Bun executable is written beside the launcher under its content's name, .multus-bun-<payloadID>
// (temp file, SHA-256 checked, renamed), and older ones there are removed; every later run finds it at once.
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
)

const (
	// posix_fadvise's POSIX_FADV_DONTNEED
	posixFadvDontneed = 4
	trailerSize       = 64
	trailerMagic      = "multus-ts-bun\x00\x00\x01"
)

func extractPayload(self, dest string) error {
	// the file this process runs, also when the path now names another (an upgrade renamed a new build over it)
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		f, err = os.Open(self)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < trailerSize {
		return errors.New(self + " carries no Bun executable (rebuild with npm run build)")
	}
	trailer := make([]byte, trailerSize)
	if _, err := f.ReadAt(trailer, st.Size()-trailerSize); err != nil {
		return err
	}
	if string(trailer[48:]) != trailerMagic {
		return errors.New(self + " carries no Bun executable (rebuild with npm run build)")
	}
	offset := int64(le64(trailer[0:8]))
	size := int64(le64(trailer[8:16]))
	sum := trailer[16:48]
	if hexString(sum[:8]) != payloadID || offset < 0 || size <= 0 || offset+size > st.Size()-trailerSize {
		return errors.New(self + ": its trailer does not match its launcher (id " + payloadID + "): the file is damaged")
	}
	tmp := dest + ".tmp-" + strconv.Itoa(os.Getpid())
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o700)
	if err != nil {
		return err
	}
	h := sha256.New()
	// 64 KiB writes: the page cache keeps the copy in 64 KiB folios (below)
	_, err = io.CopyBuffer(io.MultiWriter(out, h), io.NewSectionReader(f, offset, size), make([]byte, 64<<10))
	if err == nil && !bytes.Equal(h.Sum(nil), sum) {
		err = errors.New("the Bun executable in " + self + " does not match its checksum: the file is damaged")
	}
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
		syscall.Syscall6(syscall.SYS_FADVISE64, f.Fd(), uintptr(offset), uintptr(size), posixFadvDontneed, 0, 0)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dest)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	removeOlderPayloads(filepath.Dir(dest), filepath.Base(dest))
	return nil
}

// removeOlderPayloads removes the Bun executables of other launcher builds from dir (a running one keeps its inode;
// a launcher of that build still there extracts its own again).
func removeOlderPayloads(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		id, ok := strings.CutPrefix(name, payloadPrefix)
		if !ok || name == keep || len(id) != 16 || strings.Trim(id, "0123456789abcdef") != "" {
			continue
		}
		os.Remove(filepath.Join(dir, name))
	}
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
