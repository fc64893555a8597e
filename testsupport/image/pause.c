/*
 * The pause process of a pod on Rouse's test node: the first process of the pod sandbox,
 * which holds its namespaces, reaps the orphans of a shared PID namespace and exits 0 on
 * SIGINT or SIGTERM. It behaves like Kubernetes' pause container (build/pause/linux/pause.c).
 * testsupport/src/image compiles it with `cc -static -Os -s`: the image holds nothing else.
 */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int signo) {
  (void)signo;
  _exit(0);
}

static void on_child(int signo) {
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction reap = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
  if (sigaction(SIGINT, &stop, NULL) != 0 || sigaction(SIGTERM, &stop, NULL) != 0 ||
      sigaction(SIGCHLD, &reap, NULL) != 0) {
    return 1;
  }
  for (;;) {
    pause();
  }
}
