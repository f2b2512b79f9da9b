//go:build linux && amd64

package main

// The fast path (fastpath_amd64.s): the build makes fastEntry the ELF entry point (-ldflags=-E=main.fastEntry,
// scripts/build-steps/launcher.mjs), so a CNI call starts the Bun executable before the Go runtime starts at all;
// anything it does not handle goes on to the Go runtime's own entry and main() (docs/build.md, "The launcher").
// It reads these statically initialised strings (never code-initialised: it runs before any Go code), the same
// constants main() uses, and payloadID and payloadSize, which the build sets.
var (
	fastHeldPrefix    = heldPrefix
	fastLauncherVar   = launcherVar + "="
	fastPayloadPrefix = payloadPrefix
	fastPluginJSC     = pluginJSC
	fastPluginMalloc  = pluginMalloc
	fastChrootName    = chrootName
)

// The fast path compares argv[0]'s base name with the three longRunningNames: a compile error if that changes.
var _ = [1]struct{}{}[len(longRunningNames)-3]

// fastEntry is the process's first instruction; it never returns.
func fastEntry()
