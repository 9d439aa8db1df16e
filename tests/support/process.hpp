#pragma once
// Running programs for tests, and looking at the processes that run. No
// shell and no external tool (ps, pgrep, pkill): children are spawned with
// an explicit argv and the process table is read from /proc, so a missing
// package can never make a check pass by finding nothing.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace npc::test {

namespace fs = std::filesystem;

// ---- Running programs ------------------------------------------------------

struct RunResult {
  int exit_code = -1;  // when !signaled
  int signal = 0;      // when signaled
  bool signaled = false;
  bool timed_out = false;
  std::string out;
  std::string err;
  double seconds = 0;               // from start to reaped
  double cpu_seconds = 0;           // user + system time of the child and its reaped children
  std::uint64_t peak_rss_bytes = 0; // the largest resident set among them
  [[nodiscard]] std::string describe() const; // for assertion messages
};

// Stops a spawned program within a test's time: past it the child's process
// group is SIGKILLed and the run reported as timed out.
inline constexpr std::chrono::milliseconds kDefaultRunTimeout{60000};

struct RunOptions {
  std::map<std::string, std::string> set_env{}; // added to (or replacing in) the test environment
  std::vector<std::string> unset_env{};
  std::optional<fs::path> cwd{};
  std::chrono::milliseconds timeout = kDefaultRunTimeout;
};

// The environment every program a test runs starts from: this process's,
// less every STANDIN_*, NEURON_* and SLURM* variable and torchrun's RANK,
// LOCAL_RANK, WORLD_SIZE and LOCAL_WORLD_SIZE, so that nothing set in the
// developer's shell (or a job step the suite runs in) changes what a test sees.
[[nodiscard]] std::map<std::string, std::string> test_environment();

// Runs argv (no shell) in its own process group, stdin from /dev/null,
// stdout and stderr captured. Still running at options.timeout, its group is
// SIGKILLed and the test fails: a killed run must never pass for a result.
RunResult run(const std::vector<std::string>& argv, const RunOptions& options = {});

// Starts argv in the background in its own process group, stdout and stderr
// to `output_file`; the caller waits for it (util::wait_child).
pid_t start_background(const std::vector<std::string>& argv, const RunOptions& options,
                       const fs::path& output_file);

// A program running in the background, stdout and stderr captured to files
// <capture_stem>.out and .err. A child still running when its Child goes is
// SIGKILLed with its process group and reaped.
class Child {
public:
  Child(const std::vector<std::string>& argv, const RunOptions& options, const fs::path& capture_stem);
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child();

  [[nodiscard]] pid_t pid() const { return pid_; }
  // Still running (reaps it when it has ended).
  [[nodiscard]] bool running();
  // Signals the child itself (not its group).
  void kill(int signal_number);
  // Reaps the child; past `timeout` from its start, kills its group and
  // records a test failure.
  RunResult wait(std::chrono::milliseconds timeout = kDefaultRunTimeout);

private:
  bool try_reap(bool block);
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::chrono::steady_clock::time_point started_;
  double seconds_ = 0;
  double cpu_seconds_ = 0;
  std::uint64_t peak_rss_bytes_ = 0;
  fs::path out_path_, err_path_;
};

// ---- The process table (/proc) ---------------------------------------------

struct ProcessInfo {
  pid_t pid = 0;
  pid_t ppid = 0;
  char state = 0;      // 'R', 'S', 'D', ... (never 'Z' here)
  std::string cmdline; // argv joined by spaces
};

// Live processes (zombies left out) whose command line contains `needle`,
// other than this test process, read from /proc. A process table that
// cannot be read, or that does not show this test process, is a test
// failure: an empty answer must mean that nothing matched.
[[nodiscard]] std::vector<ProcessInfo> processes_with_cmdline(const std::string& needle);
// "  <pid> <cmdline>" lines, for assertion messages.
[[nodiscard]] std::string describe(const std::vector<ProcessInfo>& processes);

// The command line of a process, words joined by spaces; "" when gone.
[[nodiscard]] std::string cmdline_of(pid_t pid);
// Whether the process still runs (exists and is no zombie).
[[nodiscard]] bool alive(pid_t pid);
// Pids of the live children of `parent`.
[[nodiscard]] std::vector<pid_t> children_of(pid_t parent);
// Live processes whose parent is `parent` or one of its descendants.
[[nodiscard]] std::vector<pid_t> descendants_of(pid_t parent);

// Makes this test process the reaper of orphans (a killed wrapper's
// compiler, a killed launcher's workers), so they can be found and ended.
void become_subreaper();
// SIGKILLs every process descended from this one and reaps them. Only call
// when no other thread of the test is running a program.
void kill_all_descendants();

} // namespace npc::test
