/*
 * start-probe: what starting a process costs this machine, for `npm run bench` (scripts/bench/artifacts.mjs
 * `processStart`, docs/archive/performance.md, "glibc's start on this VM"). Built twice into build/bench/bin/:
 *
 *   start-probe-glibc    a dynamic glibc executable, as Bun is: `start-probe-glibc` exits at once;
 *                        `start-probe-glibc cpuid` prints the microseconds one `cpuid` instruction takes here
 *   start-probe-nolibc   -DNOLIBC -static -nostdlib: no loader and no libc, its first instruction exits
 *
 * glibc's start (the loader's, or libc.a's in a static program) reads the CPU's features and cache sizes with a few
 * dozen `cpuid` instructions (cpu_features.c, dl-cacheinfo.h). Under Intel VT-x every `cpuid` exits to the
 * hypervisor (the SDM lists it among the instructions that cause a VM exit unconditionally); on bare metal the CPU
 * answers it itself. The two executables' exec-to-exit times, side by side, show what that start costs every glibc
 * process on this machine; the bench's trivial delegate (static glibc) pays it too, in every mode alike.
 */
#ifdef NOLIBC
void _start(void) {
  __asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
}
#else
#include <cpuid.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "cpuid") == 0) {
    enum { N = 2000 };
    unsigned a, b, c, d;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < N; i++) __cpuid_count(4, i & 3, a, b, c, d);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%.3f\n", ns / N / 1e3);
  }
  return 0;
}
#endif
