//go:build linux && arm64

package main

// System calls Go's syscall package names for some architectures only (payload.go).
const (
	sysExecveat    = 281
	sysMemfdCreate = 279
)
