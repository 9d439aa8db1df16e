// Runs the stand-in binaries as child processes for the tests: explicit
// argv, a controlled environment, stdout/stderr captured to files, and a
// timeout so a broken stand-in fails a test instead of hanging the suite.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace standin::test {

using Env = std::map<std::string, std::string>;

inline constexpr std::chrono::milliseconds kDefaultTimeout{20'000};

struct ProcessResult {
  int wait_status = 0;
  std::string out;
  std::string err;
  rusage usage{};
  double seconds = 0;

  bool exited() const;
  int exit_code() const;  // -1 unless exited()
  bool signaled() const;
  int term_signal() const;  // 0 unless signaled()
  // Peak resident set in bytes (ru_maxrss is in KiB on Linux).
  long max_rss_bytes() const;
  double cpu_seconds() const;
};

class Process {
 public:
  // Starts argv[0] with the test environment: this process's environment
  // minus every STANDIN_*, NEURON_* and torchrun variable, plus `env`.
  Process(const std::vector<std::string>& argv, const Env& env, const std::string& capture_dir);
  Process(Process&& other) noexcept;
  Process& operator=(Process&&) = delete;
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process();  // kills and reaps a child still running

  pid_t pid() const { return pid_; }
  bool running();
  void kill(int signal_number);
  // Reaps the child; kills it and records a test failure after `timeout`.
  ProcessResult wait(std::chrono::milliseconds timeout = kDefaultTimeout);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int early_status_ = 0;
  rusage early_usage_{};
  std::string out_path_;
  std::string err_path_;
  std::chrono::steady_clock::time_point started_;
};

ProcessResult run_process(const std::vector<std::string>& argv, const Env& env,
                          const std::string& capture_dir,
                          std::chrono::milliseconds timeout = kDefaultTimeout);

}  // namespace standin::test
