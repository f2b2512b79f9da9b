//go:build linux && amd64

package main

// System calls Go's syscall package names for some architectures only (payload.go).
const (
	sysExecveat    = 322
	sysMemfdCreate = 319
)
