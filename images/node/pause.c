/* The sandbox ("pause") process of podshaper's test node: PID 1 of every pod's
 * sandbox. It holds the pod's namespaces open, reaps the zombies that land on it
 * (with a shared PID namespace, orphans of the pod's containers), and exits 0 on
 * SIGTERM or SIGINT. Built static (gcc -static -Os) into a FROM scratch image by
 * images/node/pause.Dockerfile; scripts/node-images.sh builds it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define VERSION "podshaper-pause 1"

static void on_stop(int sig) {
  /* write(2) and _exit(2) only: async-signal-safe. */
  static const char msg[] = "pause: shutting down on signal\n";
  (void)sig;
  ssize_t n = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)n;
  _exit(0);
}

static void on_child(int sig) {
  int saved = errno;
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  errno = saved;
}

int main(int argc, char **argv) {
  if (argc == 2 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
    puts(VERSION);
    return 0;
  }
  if (getpid() != 1)
    fprintf(stderr, "pause: warning: not PID 1 (zombies of others are not reaped here)\n");

  struct sigaction stop = {0};
  stop.sa_handler = on_stop;
  sigemptyset(&stop.sa_mask);
  if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0) {
    perror("pause: sigaction SIGINT/SIGTERM");
    return 1;
  }
  struct sigaction child = {0};
  child.sa_handler = on_child;
  sigemptyset(&child.sa_mask);
  child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGCHLD, &child, NULL) < 0) {
    perror("pause: sigaction SIGCHLD");
    return 1;
  }
  for (;;)
    pause();
  return 42; /* not reached */
}
