// churn SECONDS: forks children that exit at once and reaps them, as fast as it can, for SECONDS (a busy
// pids.max: the group's count flips between N and N+1 every few microseconds). Failed forks are retried.
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char** argv) {
  time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 10);
  while (time(NULL) < end) {
    pid_t p = fork();
    if (p == 0) _exit(0);
    if (p > 0) waitpid(p, NULL, 0);
  }
  return 0;
}
