//go:build linux

#include "textflag.h"

// The launcher's fast path (fastpath.go; docs/build.md, "The launcher"): the ELF entry point of build/multus. For
// the CNI plugin run as runtimes run it (argv[0] alone, not one of longRunningNames) it does what main() does for
// that role with raw system calls, before the Go runtime starts (which costs a call about 1.5 ms of CPU): every
// caller variable NAME=value becomes MULTUS_TS_HELD_NAME=value in the caller's order (empty entries dropped, as
// syscall.Environ does), then MULTUS_TS_LAUNCHER=<readlink /proc/self/exe>, then pluginJSC and pluginMalloc, and
// it opens
// <that directory>/.multus-bun-<payloadID> (O_PATH|O_NOFOLLOW), checks it as main() does (payload.go,
// checkPayload: a regular file of payloadSize bytes, executable by its owner, writable by no one else, owned by
// root or by the launcher file's owner) and execs that descriptor (execveat) with argv unchanged. Everything else
// goes on, with the stack as the kernel gave it, to the Go runtime's entry and main(), which decide: another role,
// more than fastVarsMax variables (main() finds a key given twice in linear time, the fast path compares pairs),
// a key given twice (syscall.Environ keeps the first only), a path /proc/self/exe names as deleted, anything too
// long, a payload that is not there or fails a check, and an exec that fails (main() extracts the payload, or
// says why in a CNI error).
//
// Before that, argv[0] named chrootName with a root and a plugin (main.go, chrootRun: the resident daemon's
// delegate inside chrootDir): chroot(2) into argv[1], chdir("/"), and exec argv[2] with argv[2:] and the
// environment unchanged. Where chroot(2) fails nothing has changed yet and main() says why; past it, a failure
// cannot go back to main() (it would enter the root again from inside it): it says so on stderr and exits 125
// (chdir), 127 (the plugin is not there) or 126, chroot(8)'s codes.

#define SYS_mmap 9
#define SYS_readlink 89
#define SYS_execve 59
#define SYS_execveat 322
#define SYS_openat 257
#define SYS_fstat 5
#define SYS_stat 4
#define SYS_close 3
#define AT_FDCWD -100
#define AT_EMPTY_PATH 0x1000
// O_PATH|O_NOFOLLOW|O_CLOEXEC
#define OPEN_FLAGS 0x2a0000
// struct stat (amd64): st_mode at 24 (u32), st_uid at 28 (u32), st_size at 48 (i64); 144 bytes
#define STAT_SIZE 144
#define SYS_chroot 161
#define SYS_chdir 80
#define SYS_write 1
#define SYS_exit_group 231
#define ENOENT 2
#define PATH_MAX 4096
#define ENV_MAX 4194304
// the pairwise check for a key given twice is quadratic: above this many variables main() decides (a map)
#define VARS_MAX 256

DATA procSelfExe<>+0(SB)/8, $"/proc/se"
DATA procSelfExe<>+8(SB)/6, $"lf/exe"
GLOBL procSelfExe<>(SB), RODATA|NOPTR, $16

DATA rootDir<>+0(SB)/1, $"/"
GLOBL rootDir<>(SB), RODATA|NOPTR, $2

// "": execveat's path with AT_EMPTY_PATH
GLOBL emptyPath<>(SB), RODATA|NOPTR, $8

// "multus-chroot: cannot run the plugin in its root\n" (49 bytes): a failed chdir or execve past the chroot
DATA chrootExecFailed<>+0(SB)/8, $"multus-c"
DATA chrootExecFailed<>+8(SB)/8, $"hroot: c"
DATA chrootExecFailed<>+16(SB)/8, $"annot ru"
DATA chrootExecFailed<>+24(SB)/8, $"n the pl"
DATA chrootExecFailed<>+32(SB)/8, $"ugin in "
DATA chrootExecFailed<>+40(SB)/8, $"its root"
DATA chrootExecFailed<>+48(SB)/1, $"\n"
GLOBL chrootExecFailed<>(SB), RODATA|NOPTR, $56

// The stack at entry: argc, argv[0..argc), NULL, envp..., NULL, auxv.
TEXT ·fastEntry(SB), NOSPLIT|NOFRAME, $0-0
	MOVQ SP, R12

	// argv[0]'s base name: BX after the last '/', DI at the NUL, CX its length
	CMPQ 0(R12), $1
	JLT  fallback
	MOVQ 8(R12), SI
	TESTQ SI, SI
	JZ   fallback
	MOVQ SI, BX
	MOVQ SI, DI
base:
	MOVBLZX (DI), AX
	TESTB AL, AL
	JZ   baseDone
	CMPB AL, $'/'
	JNE  baseNext
	LEAQ 1(DI), BX
baseNext:
	INCQ DI
	JMP  base
baseDone:
	MOVQ DI, CX
	SUBQ BX, CX

	// chrootName ROOT PLUGIN [ARG]...: argc >= 3, the base name is chrootName (static data, non-empty)
	CMPQ ·fastChrootName+8(SB), $0
	JEQ  plugin
	CMPQ 0(R12), $3
	JLT  plugin
	MOVQ ·fastChrootName(SB), R10
	MOVQ ·fastChrootName+8(SB), R9
	CALL nameIs<>(SB)
	TESTQ AX, AX
	JZ   plugin
chrootEnter:
	MOVQ 16(R12), DI
	MOVQ $SYS_chroot, AX
	SYSCALL
	TESTQ AX, AX
	JNZ  fallback
	XORQ R14, R14 // R14: 0 at the chdir, 1 at the execve
	LEAQ rootDir<>(SB), DI
	MOVQ $SYS_chdir, AX
	SYSCALL
	TESTQ AX, AX
	JNZ  chrootFailed
	// execve(argv[2], &argv[2], envp): envp starts after argv's NULL, at 8*(argc+2) from the stack's top
	MOVQ $1, R14
	MOVQ 0(R12), CX
	LEAQ 16(R12)(CX*8), DX
	MOVQ 24(R12), DI
	LEAQ 24(R12), SI
	MOVQ $SYS_execve, AX
	SYSCALL
chrootFailed:
	// AX: the chdir's or the execve's -errno; exit 125 (chdir), 127 (no such plugin) or 126 (another reason)
	MOVQ AX, R13
	MOVQ $2, DI
	LEAQ chrootExecFailed<>(SB), SI
	MOVQ $49, DX
	MOVQ $SYS_write, AX
	SYSCALL
	MOVQ $125, DI
	CMPQ R14, $0
	JEQ  chrootExit
	MOVQ $126, DI
	CMPQ R13, $-ENOENT
	JNE  chrootExit
	MOVQ $127, DI
chrootExit:
	MOVQ $SYS_exit_group, AX
	SYSCALL

plugin:
	// the strings it reads are static data; empty would mean they were not
	CMPQ ·fastHeldPrefix+8(SB), $0
	JEQ  fallback
	CMPQ ·fastLauncherVar+8(SB), $0
	JEQ  fallback
	CMPQ ·fastPayloadPrefix+8(SB), $0
	JEQ  fallback
	CMPQ ·fastPluginJSC+8(SB), $0
	JEQ  fallback
	CMPQ ·fastPluginMalloc+8(SB), $0
	JEQ  fallback
	CMPQ ·payloadID+8(SB), $0
	JEQ  fallback

	// argv[0] alone: the CNI plugin's call
	CMPQ 0(R12), $1
	JNE  fallback

	// a name ending in '/' (filepath.Base strips that)
	CMPQ BX, DI
	JNE  names0
	CMPQ DI, SI
	JNE  fallback
names0:

	// one of Multus' long-running programs
	LEAQ ·longRunningNames(SB), R8
	MOVQ $3, R13
names:
	MOVQ 0(R8), R10
	MOVQ 8(R8), R9
	CALL nameIs<>(SB)
	TESTQ AX, AX
	JNZ  fallback
	ADDQ $16, R8
	DECQ R13
	JNZ  names

	// the caller's variables: R15 non-empty ones, R14 their bytes
	LEAQ 24(R12), R13
	XORQ R14, R14
	XORQ R15, R15
	MOVQ R13, R8
count:
	MOVQ (R8), SI
	TESTQ SI, SI
	JZ   counted
	MOVQ SI, DI
countLen:
	CMPB (DI), $0
	JEQ  countLenDone
	INCQ DI
	JMP  countLen
countLenDone:
	SUBQ SI, DI
	JZ   countNext
	ADDQ DI, R14
	INCQ R15
countNext:
	ADDQ $8, R8
	JMP  count
counted:
	CMPQ R14, $ENV_MAX
	JHI  fallback
	CMPQ R15, $VARS_MAX
	JHI  fallback

	// a key given twice (the same bytes before the first '=')
	MOVQ R13, R8
dupOuter:
	MOVQ (R8), SI
	TESTQ SI, SI
	JZ   dupDone
	MOVQ R13, R9
dupInner:
	CMPQ R9, R8
	JEQ  dupOuterNext
	MOVQ (R9), DI
	XORQ R11, R11
dupByte:
	MOVBLZX (SI)(R11*1), AX
	CMPB AL, (DI)(R11*1)
	JNE  dupInnerNext
	CMPB AL, $'='
	JEQ  fallback
	TESTB AL, AL
	JZ   dupInnerNext
	INCQ R11
	JMP  dupByte
dupInnerNext:
	ADDQ $8, R9
	JMP  dupInner
dupOuterNext:
	ADDQ $8, R8
	JMP  dupOuter
dupDone:

	// one anonymous mapping: the new envp (R15 + 4 slots), then its strings
	MOVQ ·fastHeldPrefix+8(SB), AX
	INCQ AX
	IMULQ R15, AX
	ADDQ R14, AX
	LEAQ 4(R15), CX
	SHLQ $3, CX
	ADDQ CX, AX
	ADDQ $(2*PATH_MAX+5+8+2*STAT_SIZE), AX // the path twice (readlink's buffer, the directory), five NULs, two stat buffers 8-aligned
	ADDQ ·fastLauncherVar+8(SB), AX
	ADDQ ·fastPayloadPrefix+8(SB), AX
	ADDQ ·payloadID+8(SB), AX
	ADDQ ·fastPluginJSC+8(SB), AX
	ADDQ ·fastPluginMalloc+8(SB), AX
	MOVQ AX, SI
	XORQ DI, DI
	MOVQ $3, DX     // PROT_READ|PROT_WRITE
	MOVQ $0x22, R10 // MAP_PRIVATE|MAP_ANONYMOUS
	MOVQ $-1, R8
	XORQ R9, R9
	MOVQ $SYS_mmap, AX
	SYSCALL
	CMPQ AX, $-4096
	JHI  fallback
	MOVQ AX, BX
	LEAQ 4(R15), R9
	LEAQ (BX)(R9*8), R9

	// envp[R15]: MULTUS_TS_LAUNCHER=<this executable>
	MOVQ R9, (BX)(R15*8)
	MOVQ R9, DI
	MOVQ ·fastLauncherVar(SB), SI
	MOVQ ·fastLauncherVar+8(SB), CX
	REP; MOVSB
	MOVQ DI, R10
	LEAQ procSelfExe<>(SB), DI
	MOVQ R10, SI
	MOVQ $(PATH_MAX-1), DX
	MOVQ $SYS_readlink, AX
	SYSCALL
	TESTQ AX, AX
	JLE  fallback
	CMPQ AX, $(PATH_MAX-1)
	JGE  fallback
	MOVB $0, (R10)(AX*1)
	CMPB -1(R10)(AX*1), $')'
	JEQ  fallback
	LEAQ 1(R10)(AX*1), R9

	// R14: <its directory>/.multus-bun-<payloadID>
	LEAQ (R10)(AX*1), DX
slash:
	DECQ DX
	CMPQ DX, R10
	JLT  fallback
	CMPB (DX), $'/'
	JNE  slash
	MOVQ R9, R14
	MOVQ R9, DI
	MOVQ R10, SI
	MOVQ DX, CX
	SUBQ R10, CX
	INCQ CX
	REP; MOVSB
	MOVQ ·fastPayloadPrefix(SB), SI
	MOVQ ·fastPayloadPrefix+8(SB), CX
	REP; MOVSB
	MOVQ ·payloadID(SB), SI
	MOVQ ·payloadID+8(SB), CX
	REP; MOVSB
	MOVB $0, (DI)
	LEAQ 1(DI), R9

	// envp[R15+1], envp[R15+2]: the plugin's settings; envp[R15+3]: NULL
	MOVQ R9, 8(BX)(R15*8)
	MOVQ R9, DI
	MOVQ ·fastPluginJSC(SB), SI
	MOVQ ·fastPluginJSC+8(SB), CX
	REP; MOVSB
	MOVB $0, (DI)
	LEAQ 1(DI), R9
	MOVQ R9, 16(BX)(R15*8)
	MOVQ R9, DI
	MOVQ ·fastPluginMalloc(SB), SI
	MOVQ ·fastPluginMalloc+8(SB), CX
	REP; MOVSB
	MOVB $0, (DI)
	LEAQ 1(DI), R9
	MOVQ $0, 24(BX)(R15*8)

	// envp[0..R15): MULTUS_TS_HELD_<entry>, in the caller's order
	MOVQ R13, R8
	MOVQ BX, DX
held:
	MOVQ (R8), R10
	TESTQ R10, R10
	JZ   exec
	ADDQ $8, R8
	CMPB (R10), $0
	JEQ  held
	MOVQ R9, (DX)
	ADDQ $8, DX
	MOVQ R9, DI
	MOVQ ·fastHeldPrefix(SB), SI
	MOVQ ·fastHeldPrefix+8(SB), CX
	REP; MOVSB
heldByte:
	MOVBLZX (R10), AX
	MOVB AL, (DI)
	INCQ R10
	INCQ DI
	TESTB AL, AL
	JNZ  heldByte
	MOVQ DI, R9
	JMP  held

exec:
	// R15: payloadSize (16 hex digits); R9 (8-aligned): two struct stat
	MOVQ ·payloadSize(SB), SI
	MOVQ ·payloadSize+8(SB), CX
	CMPQ CX, $16
	JNE  fallback
	XORQ R15, R15
sizeDigit:
	MOVBLZX (SI), AX
	SUBL $'0', AX
	CMPL AX, $10
	JCS  sizeAdd
	SUBL $('a'-'0'), AX
	CMPL AX, $6
	JCC  fallback
	ADDL $10, AX
sizeAdd:
	SHLQ $4, R15
	ORQ  AX, R15
	INCQ SI
	DECQ CX
	JNZ  sizeDigit
	ADDQ $7, R9
	ANDQ $~7, R9

	// R13: openat(AT_FDCWD, R14, O_PATH|O_NOFOLLOW|O_CLOEXEC)
	MOVQ $AT_FDCWD, DI
	MOVQ R14, SI
	MOVQ $OPEN_FLAGS, DX
	XORQ R10, R10
	MOVQ $SYS_openat, AX
	SYSCALL
	TESTQ AX, AX
	JS   fallback
	MOVQ AX, R13
	MOVQ R13, DI
	MOVQ R9, SI
	MOVQ $SYS_fstat, AX
	SYSCALL
	TESTQ AX, AX
	JNZ  notChecked
	// a regular file (S_IFREG), no group or other write bit (022), its owner's execute bit (0100), payloadSize bytes
	MOVL 24(R9), AX
	MOVL AX, CX
	ANDL $0xf000, CX
	CMPL CX, $0x8000
	JNE  notChecked
	TESTL $0x12, AX
	JNZ  notChecked
	TESTL $0x40, AX
	JZ   notChecked
	CMPQ 48(R9), R15
	JNE  notChecked
	// owned by root, or by the launcher file's owner (stat /proc/self/exe: only then)
	MOVL 28(R9), R15
	TESTL R15, R15
	JZ   checked
	LEAQ procSelfExe<>(SB), DI
	LEAQ STAT_SIZE(R9), SI
	MOVQ $SYS_stat, AX
	SYSCALL
	TESTQ AX, AX
	JNZ  notChecked
	CMPL (STAT_SIZE+28)(R9), R15
	JNE  notChecked
checked:
	// execveat(R13, "", argv, envp, AT_EMPTY_PATH): the file checked, whatever its name names now
	MOVQ R13, DI
	LEAQ emptyPath<>(SB), SI
	LEAQ 8(R12), DX
	MOVQ BX, R10
	MOVQ $AT_EMPTY_PATH, R8
	MOVQ $SYS_execveat, AX
	SYSCALL
notChecked:
	MOVQ R13, DI
	MOVQ $SYS_close, AX
	SYSCALL

	// not started (the first run of a copy, which main() extracts; a file that fails a check; or main() says why)
fallback:
	MOVQ R12, SP
	JMP  _rt0_amd64_linux(SB)

// nameIs: AX = 1 when the CX bytes at BX are the R9 bytes at R10, else 0 (uses R11 and DX). Called with the
// kernel's stack, which has room for the return address; fastEntry's registers R8, R12-R15 and SI, DI are kept.
TEXT nameIs<>(SB), NOSPLIT|NOFRAME, $0-0
	XORQ AX, AX
	CMPQ R9, CX
	JNE  nameIsDone
	XORQ R11, R11
nameIsByte:
	CMPQ R11, CX
	JEQ  nameIsYes
	MOVBLZX (BX)(R11*1), DX
	CMPB DL, (R10)(R11*1)
	JNE  nameIsDone
	INCQ R11
	JMP  nameIsByte
nameIsYes:
	MOVQ $1, AX
nameIsDone:
	RET
