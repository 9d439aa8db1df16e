// npc_peak_rss OUT -- COMMAND...: runs COMMAND, waits for it, writes its peak
// RSS in bytes (ru_maxrss from wait4) to the file OUT and exits with its
// status.
//
// Why a separate small program: on Linux a child's ru_maxrss starts from the
// high-water mark of the memory it was forked (or vforked) from, because exec
// carries the old address space's peak into the new one's record. A child
// spawned straight from the benchmark driver would therefore report at least
// the driver's own peak. This program is small and freshly exec'd, so what it
// passes on is a couple of MiB at most.

#include <csignal>
#include <cstdio>
#include <cstring>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[2], "--") != 0) {
    std::fprintf(stderr, "usage: npc_peak_rss OUT -- COMMAND [ARGS...]\n");
    return 2;
  }
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[3], nullptr, nullptr, argv + 3, environ);
  if (rc != 0) {
    std::fprintf(stderr, "npc_peak_rss: cannot run %s: %s\n", argv[3], std::strerror(rc));
    return 127;
  }
  int status = 0;
  struct rusage usage {};
  while (wait4(pid, &status, 0, &usage) < 0) {
  }
  if (FILE* out = std::fopen(argv[1], "w")) {
    std::fprintf(out, "%lld\n", static_cast<long long>(usage.ru_maxrss) * 1024);
    std::fclose(out);
  }
  if (WIFSIGNALED(status)) {
    std::signal(WTERMSIG(status), SIG_DFL);
    std::raise(WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return WEXITSTATUS(status);
}
