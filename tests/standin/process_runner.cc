#include "process_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

extern char** environ;

namespace standin::test {
namespace {

constexpr std::chrono::milliseconds kPollInterval{2};
constexpr long kBytesPerKib = 1024;
constexpr double kMicrosPerSec = 1e6;

bool has_prefix(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// Variables that would leak settings from the developer's shell into a test.
bool is_isolated_variable(const std::string& name) {
  return has_prefix(name, "STANDIN_") || has_prefix(name, "NEURON_") || name == "RANK" ||
         name == "LOCAL_RANK" || name == "WORLD_SIZE" || name == "LOCAL_WORLD_SIZE";
}

std::vector<std::string> build_environment(const Env& env) {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const std::string name = text.substr(0, text.find('='));
    if (!is_isolated_variable(name) && env.count(name) == 0) entries.push_back(text);
  }
  for (const auto& [name, value] : env) entries.push_back(name + "=" + value);
  return entries;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

std::string next_capture_stem(const std::string& dir) {
  static std::atomic<int> counter{0};
  return dir + "/process-" + std::to_string(counter++);
}

}  // namespace

bool ProcessResult::exited() const { return WIFEXITED(wait_status); }
int ProcessResult::exit_code() const { return exited() ? WEXITSTATUS(wait_status) : -1; }
bool ProcessResult::signaled() const { return WIFSIGNALED(wait_status); }
int ProcessResult::term_signal() const { return signaled() ? WTERMSIG(wait_status) : 0; }
long ProcessResult::max_rss_bytes() const { return usage.ru_maxrss * kBytesPerKib; }
double ProcessResult::cpu_seconds() const {
  const auto to_seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / kMicrosPerSec;
  };
  return to_seconds(usage.ru_utime) + to_seconds(usage.ru_stime);
}

Process::Process(const std::vector<std::string>& argv, const Env& env, const std::string& capture_dir) {
  const std::string stem = next_capture_stem(capture_dir);
  out_path_ = stem + ".out";
  err_path_ = stem + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> args = argv;
  std::vector<std::string> envs = build_environment(env);
  std::vector<char*> c_argv = c_strings(args);
  std::vector<char*> c_env = c_strings(envs);
  started_ = std::chrono::steady_clock::now();
  const int error = posix_spawn(&pid_, argv.at(0).c_str(), &actions, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    pid_ = -1;
    ADD_FAILURE() << "cannot start " << argv.at(0) << ": " << std::strerror(error);
  }
}

Process::Process(Process&& other) noexcept
    : pid_(other.pid_),
      reaped_(other.reaped_),
      early_status_(other.early_status_),
      early_usage_(other.early_usage_),
      out_path_(std::move(other.out_path_)),
      err_path_(std::move(other.err_path_)),
      started_(other.started_) {
  other.pid_ = -1;
}

Process::~Process() {
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

bool Process::running() {
  if (pid_ <= 0 || reaped_) return false;
  const pid_t done = wait4(pid_, &early_status_, WNOHANG, &early_usage_);
  if (done == pid_) reaped_ = true;
  return !reaped_;
}

void Process::kill(int signal_number) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, signal_number);
}

ProcessResult Process::wait(std::chrono::milliseconds timeout) {
  ProcessResult result;
  if (pid_ <= 0) return result;
  const auto deadline = started_ + timeout;
  while (!reaped_) {
    const pid_t done = wait4(pid_, &early_status_, WNOHANG, &early_usage_);
    if (done == pid_) {
      reaped_ = true;
      break;
    }
    if (done < 0 && errno != EINTR) {
      ADD_FAILURE() << "wait4 failed: " << std::strerror(errno);
      reaped_ = true;
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "process " << pid_ << " still running after " << timeout.count() << " ms; killed";
      ::kill(pid_, SIGKILL);
      wait4(pid_, &early_status_, 0, &early_usage_);
      reaped_ = true;
      break;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  result.wait_status = early_status_;
  result.usage = early_usage_;
  result.out = slurp(out_path_);
  result.err = slurp(err_path_);
  return result;
}

ProcessResult run_process(const std::vector<std::string>& argv, const Env& env,
                          const std::string& capture_dir, std::chrono::milliseconds timeout) {
  Process process(argv, env, capture_dir);
  return process.wait(timeout);
}

}  // namespace standin::test
