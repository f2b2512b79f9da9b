/* The pause process of the test sandbox image (test/runtime/build.sh): sleeps until SIGINT/SIGTERM, reaps
 * children. Built with gcc -static so the image needs no libc. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int sig) { (void)sig; _exit(0); }
static void reap(int sig) { (void)sig; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGINT, quit);
  signal(SIGTERM, quit);
  signal(SIGCHLD, reap);
  for (;;) pause();
}
