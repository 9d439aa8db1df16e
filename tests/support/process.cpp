#include "process.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

#include <gtest/gtest.h>

#include <npc/util/fs.hpp>
#include <npc/util/process.hpp>

#include "files.hpp"

namespace npc::test {

namespace {

// How often a waiting loop looks again: short next to the stand-ins' 1 ms
// compiles, long enough not to compete with them for the CPU.
constexpr std::chrono::milliseconds kPollInterval{2};

bool is_isolated_variable(const std::string& name) {
  // SLURM_*: a suite run inside a job step must not make every launcher a
  // task of it.
  return name.starts_with("STANDIN_") || name.starts_with("NEURON_") || name.starts_with("SLURM") ||
         name == "RANK" || name == "LOCAL_RANK" || name == "WORLD_SIZE" || name == "LOCAL_WORLD_SIZE";
}

util::Environment environment_for(const RunOptions& options) {
  util::Environment env;
  for (const auto& [name, value] : test_environment()) env.set(name, value);
  for (const auto& name : options.unset_env) env.unset(name);
  for (const auto& [name, value] : options.set_env) env.set(name, value);
  return env;
}

// What every program a test starts gets: its arguments, environment and
// working directory; where its output goes is the caller's.
util::SpawnOptions spawn_options_for(const std::vector<std::string>& argv, const RunOptions& options) {
  util::SpawnOptions spawn;
  spawn.argv = argv;
  spawn.environment = environment_for(options);
  spawn.working_dir = options.cwd;
  return spawn;
}

double seconds_of(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

// Fills the ending of `result` from a wait status and its rusage.
void record_end(RunResult& result, int status, const rusage& usage) {
  result.signaled = WIFSIGNALED(status);
  result.signal = result.signaled ? WTERMSIG(status) : 0;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.cpu_seconds = seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
  result.peak_rss_bytes = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024; // KiB on Linux
}

// Blocks until `pid` ends; false (and a test failure) when it cannot be waited for.
bool wait_for_child(pid_t pid, int& status, rusage& usage) {
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno == EINTR) continue;
    ADD_FAILURE() << "cannot wait for process " << pid << ": " << std::strerror(errno);
    return false;
  }
  return true;
}

} // namespace

std::map<std::string, std::string> test_environment() {
  std::map<std::string, std::string> env;
  for (const auto& entry : util::Environment::current().entries()) {
    auto eq = entry.find('=');
    std::string name = entry.substr(0, eq);
    if (!is_isolated_variable(name)) env[name] = entry.substr(eq + 1);
  }
  return env;
}

std::string RunResult::describe() const {
  std::ostringstream s;
  if (timed_out) s << "TIMED OUT; ";
  if (signaled) s << "killed by signal " << signal;
  else s << "exit " << exit_code;
  s << "\n--- stdout ---\n" << out << "\n--- stderr ---\n" << err;
  return s.str();
}

RunResult run(const std::vector<std::string>& argv, const RunOptions& options) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
  util::SpawnOptions spawn = spawn_options_for(argv, options);
  spawn.output = util::OutputTo::fds;
  spawn.stdout_fd = out_pipe[1];
  spawn.stderr_fd = err_pipe[1];
  auto started = std::chrono::steady_clock::now();
  auto child = util::spawn(spawn);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  RunResult result;
  if (!child) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    result.err = child.error();
    return result;
  }
  auto deadline = started + options.timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  char buffer[65536];
  while (open_count > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ADD_FAILURE() << argv.front() << " still running after " << options.timeout.count() << " ms; killed";
      result.timed_out = true;
      util::kill_process_group(child->pid, SIGKILL);
      break;
    }
    if (::poll(fds, 2, static_cast<int>(std::min<long>(left.count(), 1000))) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  rusage usage{};
  if (wait_for_child(child->pid, status, usage)) record_end(result, status, usage);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

pid_t start_background(const std::vector<std::string>& argv, const RunOptions& options,
                       const fs::path& output_file) {
  util::SpawnOptions spawn = spawn_options_for(argv, options);
  spawn.output = util::OutputTo::file;
  spawn.output_file = output_file;
  auto child = util::spawn(spawn);
  if (!child) throw std::runtime_error(child.error());
  return child->pid;
}

// ---- Child -------------------------------------------------------------------

Child::Child(const std::vector<std::string>& argv, const RunOptions& options, const fs::path& capture_stem)
    : started_(std::chrono::steady_clock::now()),
      out_path_(capture_stem.string() + ".out"),
      err_path_(capture_stem.string() + ".err") {
  int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0 || err < 0) {
    ADD_FAILURE() << "cannot create " << out_path_ << " or " << err_path_ << ": " << std::strerror(errno);
  } else {
    util::SpawnOptions spawn = spawn_options_for(argv, options);
    spawn.output = util::OutputTo::fds;
    spawn.stdout_fd = out;
    spawn.stderr_fd = err;
    auto child = util::spawn(spawn);
    if (child) pid_ = child->pid;
    else ADD_FAILURE() << "cannot start " << argv.at(0) << ": " << child.error();
  }
  if (out >= 0) ::close(out);
  if (err >= 0) ::close(err);
}

Child::Child(Child&& other) noexcept
    : pid_(other.pid_),
      reaped_(other.reaped_),
      status_(other.status_),
      started_(other.started_),
      seconds_(other.seconds_),
      cpu_seconds_(other.cpu_seconds_),
      peak_rss_bytes_(other.peak_rss_bytes_),
      out_path_(std::move(other.out_path_)),
      err_path_(std::move(other.err_path_)) {
  other.pid_ = -1;
}

Child::~Child() {
  if (pid_ > 0 && !reaped_) {
    util::kill_process_group(pid_, SIGKILL);
    std::ignore = ::kill(pid_, SIGKILL);
    std::ignore = try_reap(true);
  }
}

bool Child::try_reap(bool block) {
  int status = 0;
  rusage usage{};
  pid_t done = 0;
  do {
    done = ::wait4(pid_, &status, block ? 0 : WNOHANG, &usage);
  } while (done < 0 && errno == EINTR);
  if (done == 0) return false;
  if (done < 0) {
    ADD_FAILURE() << "cannot wait for process " << pid_ << ": " << std::strerror(errno);
    reaped_ = true;
    return true;
  }
  reaped_ = true;
  status_ = status;
  seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  cpu_seconds_ = seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
  peak_rss_bytes_ = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  return true;
}

bool Child::running() {
  if (pid_ <= 0 || reaped_) return false;
  return !try_reap(false);
}

void Child::kill(int signal_number) {
  if (pid_ > 0 && !reaped_) std::ignore = ::kill(pid_, signal_number);
}

RunResult Child::wait(std::chrono::milliseconds timeout) {
  RunResult result;
  if (pid_ <= 0) return result;
  const auto deadline = started_ + timeout;
  while (!reaped_ && !try_reap(false)) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "process " << pid_ << " still running after " << timeout.count() << " ms; killed";
      result.timed_out = true;
      util::kill_process_group(pid_, SIGKILL);
      std::ignore = ::kill(pid_, SIGKILL);
      std::ignore = try_reap(true);
      break;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  result.signaled = WIFSIGNALED(status_);
  result.signal = result.signaled ? WTERMSIG(status_) : 0;
  result.exit_code = WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  result.seconds = seconds_;
  result.cpu_seconds = cpu_seconds_;
  result.peak_rss_bytes = peak_rss_bytes_;
  result.out = read_text(out_path_);
  result.err = read_text(err_path_);
  return result;
}

// ---- The process table ---------------------------------------------------------

namespace {

struct StatLine {
  char state = 0;
  pid_t ppid = 0;
};

// State and parent from /proc/<pid>/stat; nullopt when the process is gone.
std::optional<StatLine> read_stat(pid_t pid) {
  // util::read_file, not a stream: reading the file of a process that has
  // just ended fails with ESRCH, which libstdc++'s filebuf throws.
  auto text = util::read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!text) return std::nullopt;
  std::string line = text->substr(0, text->find('\n'));
  // The command name may hold spaces and parentheses: fields follow the last ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  StatLine stat;
  long ppid = 0;
  if (std::sscanf(line.c_str() + close + 1, " %c %ld", &stat.state, &ppid) != 2) return std::nullopt;
  stat.ppid = static_cast<pid_t>(ppid);
  return stat;
}

bool is_live_state(char state) { return state != 'Z' && state != 'X' && state != 'x'; }

// Every process in /proc, with its state, parent and command line; nullopt
// when /proc cannot be listed.
std::optional<std::vector<ProcessInfo>> process_table() {
  auto names = util::list_names("/proc");
  if (!names) return std::nullopt;
  std::vector<ProcessInfo> table;
  for (const auto& name : *names) {
    char* end = nullptr;
    long pid = std::strtol(name.c_str(), &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    auto stat = read_stat(static_cast<pid_t>(pid));
    if (!stat) continue; // ended while we looked
    table.push_back({static_cast<pid_t>(pid), stat->ppid, stat->state, cmdline_of(static_cast<pid_t>(pid))});
  }
  return table;
}

} // namespace

std::vector<ProcessInfo> processes_with_cmdline(const std::string& needle) {
  std::vector<ProcessInfo> found;
  if (needle.empty()) {
    ADD_FAILURE() << "processes_with_cmdline: an empty needle matches every process";
    return found;
  }
  auto table = process_table();
  if (!table) {
    ADD_FAILURE() << "cannot list processes: /proc cannot be read (" << std::strerror(errno)
                  << "); the check needs procfs mounted at /proc";
    return found;
  }
  const pid_t self = ::getpid();
  bool saw_self = false;
  for (auto& p : *table) {
    if (p.pid == self) {
      saw_self = !p.cmdline.empty();
      continue;
    }
    if (is_live_state(p.state) && p.cmdline.find(needle) != std::string::npos) found.push_back(std::move(p));
  }
  if (!saw_self)
    ADD_FAILURE() << "the process table read from /proc does not show this test process (pid " << self
                  << ") with its command line: /proc is not this process's procfs, so finding no process "
                     "there would prove nothing";
  return found;
}

std::string describe(const std::vector<ProcessInfo>& processes) {
  std::ostringstream s;
  for (const auto& p : processes) s << "  " << p.pid << " " << p.cmdline << "\n";
  return s.str();
}

std::string cmdline_of(pid_t pid) {
  // Empty when the process has ended (ESRCH or ENOENT), never an exception.
  std::string text = util::read_file("/proc/" + std::to_string(pid) + "/cmdline").value_or(std::string());
  while (!text.empty() && text.back() == '\0') text.pop_back();
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

bool alive(pid_t pid) {
  if (pid <= 0) return false;
  auto stat = read_stat(pid);
  return stat && is_live_state(stat->state);
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& p : util::list_processes())
    if (p.ppid == parent && is_live_state(p.state)) out.push_back(p.pid);
  return out;
}

std::vector<pid_t> descendants_of(pid_t parent) {
  auto all = util::list_processes();
  std::vector<pid_t> out, frontier{parent};
  while (!frontier.empty()) {
    pid_t p = frontier.back();
    frontier.pop_back();
    for (const auto& q : all)
      if (q.ppid == p && is_live_state(q.state)) {
        out.push_back(q.pid);
        frontier.push_back(q.pid);
      }
  }
  return out;
}

void become_subreaper() { util::become_subreaper(); }

void kill_all_descendants() {
  util::kill_all_descendants(20);
  // Reap whatever is left over (already ended children).
  int status = 0;
  while (::waitpid(-1, &status, WNOHANG) > 0) {
  }
}

} // namespace npc::test
