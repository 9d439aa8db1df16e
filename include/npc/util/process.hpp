#pragma once
// Child processes: spawned with posix_spawn and an explicit argv (never a
// shell), default signal handlers, an empty signal mask, their own process
// group and stdin from /dev/null.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <npc/util/exit_code.hpp>
#include <npc/util/result.hpp>

namespace npc::util {

namespace fs = std::filesystem;

// The environment handed to a child: a copy of ours with changes applied.
class Environment {
public:
  static Environment current();
  void set(const std::string& name, const std::string& value);
  void unset(const std::string& name);
  [[nodiscard]] std::optional<std::string> get(const std::string& name) const;
  [[nodiscard]] std::vector<std::string> entries() const; // "NAME=value"

private:
  std::map<std::string, std::string> vars_;
};

enum class OutputTo {
  inherit, // the child writes where we write
  file,    // stdout and stderr appended to output_file
  pipe,    // stdout and stderr to a pipe whose read end is returned
  fds      // stdout to stdout_fd, stderr to stderr_fd (the caller's descriptors)
};

struct SpawnOptions {
  std::vector<std::string> argv;
  std::optional<Environment> environment; // nullopt: inherit ours
  std::optional<fs::path> working_dir;
  OutputTo output = OutputTo::inherit;
  fs::path output_file;
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool stdin_from_null = true;
  bool own_process_group = true;
  // The child is SIGKILLed by the kernel when the thread that spawned it
  // ends, even if we die by SIGKILL ourselves (PR_SET_PDEATHSIG). Started
  // with a vfork of our own, as cheap as posix_spawn's; for children that
  // must not outlive us, like a compiler whose result nobody would publish.
  bool die_with_parent = false;
};

struct Child {
  pid_t pid = -1;
  int output_fd = -1; // read end of the pipe with OutputTo::pipe; caller closes it
};

// argv[0] is looked up on PATH when it has no slash.
[[nodiscard]] Result<Child> spawn(const SpawnOptions& options);

struct ExitStatus {
  bool signaled = false;
  int code = 0;   // exit code when !signaled
  int signal = 0; // signal number when signaled
  std::uint64_t peak_rss_bytes = 0;

  [[nodiscard]] bool success() const { return !signaled && code == 0; }
  // "exit code 3" or "killed by signal SIGKILL"
  [[nodiscard]] std::string describe() const;
  // What a shell would report: the code, or 128 + the signal number.
  [[nodiscard]] int shell_code() const { return signaled ? exit_status_for_signal(signal) : code; }
};

// Blocks until the child ends (waitpid loops on EINTR).
[[nodiscard]] ExitStatus wait_child(pid_t pid);
// The status if the child has ended, else nullopt. Never blocks.
[[nodiscard]] std::optional<ExitStatus> try_wait_child(pid_t pid);

// "SIGKILL" for 9; "signal 77" for one without a name.
[[nodiscard]] std::string signal_name(int signal);

// Signals a whole process group; ESRCH (already gone) is not an error.
void kill_process_group(pid_t pgid, int signal);

// Absolute path of an executable: a name with a slash is checked as it is,
// else each PATH entry is tried, passing over those `skip` says to. The
// failure says what was searched.
[[nodiscard]] Result<fs::path> find_executable(const std::string& name, const std::optional<std::string>& path_var,
                                               const std::function<bool(const fs::path&)>& skip = {});

[[nodiscard]] bool process_alive(pid_t pid);

} // namespace npc::util

#include <set>
namespace npc::util {

// Makes this process the reaper of its orphaned descendants (Linux
// PR_SET_CHILD_SUBREAPER), so that a grandchild whose parent died can still
// be found and ended.
void become_subreaper();

// Reaps ended children that are not in `tracked` (orphans handed to us as
// subreaper), leaving the tracked ones for their owners to wait for.
void reap_untracked_children(const std::set<pid_t>& tracked);

// One line of the process table, from /proc/<pid>/stat.
struct ProcessEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgid = 0;
  char state = 0; // 'R', 'S', 'Z', ...
};
// Every process visible in /proc (empty when /proc cannot be read).
[[nodiscard]] std::vector<ProcessEntry> list_processes();

// SIGKILLs every process whose parent is this one, and their process groups,
// repeating until none is left or `rounds` passes have been made.
void kill_all_descendants(int rounds = 5);

} // namespace npc::util
