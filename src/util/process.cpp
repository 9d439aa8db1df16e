#include <npc/util/process.hpp>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <npc/util/fs.hpp>

extern char** environ;

namespace npc::util {

Environment Environment::current() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.vars_[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  return env;
}

void Environment::set(const std::string& name, const std::string& value) { vars_[name] = value; }
void Environment::unset(const std::string& name) { vars_.erase(name); }

std::optional<std::string> Environment::get(const std::string& name) const {
  auto it = vars_.find(name);
  if (it == vars_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Environment::entries() const {
  std::vector<std::string> out;
  out.reserve(vars_.size());
  for (const auto& [name, value] : vars_) out.push_back(name + "=" + value);
  return out;
}

namespace {

// RAII for the posix_spawn attribute and file-action objects.
struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

// vfork + exec for die_with_parent, which posix_spawn cannot ask for. The
// child borrows the parent's memory until it execs, as glibc's posix_spawn
// does: a fork would copy the page tables and make both processes take
// copy-on-write faults, which measured about 3 ms of CPU per spawn, parent
// and child together, on a loaded 2-core VM (docs/schedule-overhead.md);
// the compile entry pays it once per compile. Between vfork and exec the child only makes system calls on data
// prepared before the vfork, writes no memory but errno, and runs no signal
// handler: every signal is blocked across the vfork and the child resets
// each handler to the default before it unblocks them. An exec failure
// travels back as an errno over a close-on-exec pipe, so the caller sees it
// as posix_spawn would report it.
Result<pid_t> fork_exec(const SpawnOptions& options, const char* program, char* const argv[],
                        char* const envp[], int pipe_write_end) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    return fail(std::string("cannot create a pipe: ") + std::strerror(errno));
  UniqueFd report_read(report[0]);
  UniqueFd report_write(report[1]);
  const char* output_file = options.output == OutputTo::file ? options.output_file.c_str() : nullptr;
  const char* working_dir = options.working_dir ? options.working_dir->c_str() : nullptr;
  pid_t parent = ::getpid();

  sigset_t all, old_mask;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  pid_t pid = ::vfork();
  if (pid < 0) {
    int err = errno;
    ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    return fail(std::string("cannot fork: ") + std::strerror(err));
  }
  if (pid == 0) {
    auto give_up = [&](int err) {
      std::ignore = ::write(report[1], &err, sizeof err);
      ::_exit(127);
    };
    if (options.own_process_group && ::setpgid(0, 0) != 0) give_up(errno);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) give_up(errno);
    if (::getppid() != parent) ::_exit(127); // the parent died before the request took
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) std::ignore = ::sigaction(sig, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.stdin_from_null) {
      int in = ::open("/dev/null", O_RDONLY);
      if (in < 0 || ::dup2(in, STDIN_FILENO) < 0) give_up(errno);
      if (in != STDIN_FILENO) ::close(in);
    }
    if (output_file != nullptr) {
      int out = ::open(output_file, O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (out < 0 || ::dup2(out, STDOUT_FILENO) < 0 || ::dup2(out, STDERR_FILENO) < 0) give_up(errno);
      if (out != STDOUT_FILENO && out != STDERR_FILENO) ::close(out);
    } else if (options.output == OutputTo::pipe) {
      if (::dup2(pipe_write_end, STDOUT_FILENO) < 0 || ::dup2(pipe_write_end, STDERR_FILENO) < 0) give_up(errno);
    } else if (options.output == OutputTo::fds) {
      if (::dup2(options.stdout_fd, STDOUT_FILENO) < 0 || ::dup2(options.stderr_fd, STDERR_FILENO) < 0)
        give_up(errno);
    }
    if (working_dir != nullptr && ::chdir(working_dir) != 0) give_up(errno);
    ::execve(program, argv, envp);
    give_up(errno);
  }
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  report_write.reset();
  int err = 0;
  ssize_t got;
  do got = ::read(report_read.get(), &err, sizeof err);
  while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof err)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    return fail(std::string("cannot run ") + program + ": " + std::strerror(err));
  }
  return pid;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

} // namespace

Result<Child> spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return fail("nothing to run: empty command");
  std::optional<std::string> path_var;
  if (options.environment)
    path_var = options.environment->get("PATH");
  else if (const char* p = std::getenv("PATH"))
    path_var = p;
  auto program = find_executable(options.argv[0], path_var);
  if (!program) return fail(program.error());

  SpawnSetup setup;
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&setup.attr, &empty);
  sigset_t all;
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  posix_spawnattr_setsigdefault(&setup.attr, &all);
  if (options.own_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&setup.attr, 0);
  }
  posix_spawnattr_setflags(&setup.attr, flags);

  if (options.stdin_from_null)
    posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);

  UniqueFd pipe_read, pipe_write;
  if (options.output == OutputTo::file) {
    posix_spawn_file_actions_addopen(&setup.actions, STDOUT_FILENO, options.output_file.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&setup.actions, STDOUT_FILENO, STDERR_FILENO);
  } else if (options.output == OutputTo::pipe) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      return fail(std::string("cannot create a pipe: ") + std::strerror(errno));
    pipe_read.reset(fds[0]);
    pipe_write.reset(fds[1]);
    posix_spawn_file_actions_adddup2(&setup.actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&setup.actions, fds[1], STDERR_FILENO);
  }
  if (options.output == OutputTo::fds) {
    posix_spawn_file_actions_adddup2(&setup.actions, options.stdout_fd, STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&setup.actions, options.stderr_fd, STDERR_FILENO);
  }
  if (options.working_dir)
    posix_spawn_file_actions_addchdir_np(&setup.actions, options.working_dir->c_str());

  std::vector<std::string> argv = options.argv;
  auto argv_c = c_strings(argv);
  std::vector<std::string> env_strings;
  std::vector<char*> env_c;
  char** envp = environ;
  if (options.environment) {
    env_strings = options.environment->entries();
    env_c = c_strings(env_strings);
    envp = env_c.data();
  }

  if (options.die_with_parent) {
    auto forked = fork_exec(options, program->c_str(), argv_c.data(), envp, pipe_write.get());
    if (!forked) return fail(forked.error());
    Child child;
    child.pid = *forked;
    if (options.output == OutputTo::pipe) child.output_fd = pipe_read.release();
    return child;
  }
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, program->c_str(), &setup.actions, &setup.attr, argv_c.data(), envp);
  if (rc != 0)
    return fail("cannot run " + program->string() + ": " + std::strerror(rc));
  Child child;
  child.pid = pid;
  if (options.output == OutputTo::pipe) child.output_fd = pipe_read.release();
  return child;
}

namespace {
ExitStatus to_exit_status(int status, const struct rusage& usage) {
  ExitStatus exit;
  if (WIFSIGNALED(status)) {
    exit.signaled = true;
    exit.signal = WTERMSIG(status);
  } else {
    exit.code = WEXITSTATUS(status);
  }
  exit.peak_rss_bytes = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024; // ru_maxrss is KiB
  return exit;
}
} // namespace

ExitStatus wait_child(pid_t pid) {
  int status = 0;
  struct rusage usage {};
  while (::wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) return ExitStatus{false, 127, 0, 0};
  }
  return to_exit_status(status, usage);
}

std::optional<ExitStatus> try_wait_child(pid_t pid) {
  int status = 0;
  struct rusage usage {};
  for (;;) {
    pid_t r = ::wait4(pid, &status, WNOHANG, &usage);
    if (r == 0) return std::nullopt;
    if (r < 0) {
      if (errno == EINTR) continue;
      return ExitStatus{false, 127, 0, 0}; // not our child any more
    }
    return to_exit_status(status, usage);
  }
}

std::string ExitStatus::describe() const {
  if (signaled) return "killed by signal " + signal_name(signal);
  return "exit code " + std::to_string(code);
}

#if !__GLIBC_PREREQ(2, 32)
// glibc before 2.32 has no sigabbrev_np: the names of the standard signals.
static const char* sigabbrev_np(int signal) {
  switch (signal) {
  case SIGHUP: return "HUP"; case SIGINT: return "INT"; case SIGQUIT: return "QUIT";
  case SIGILL: return "ILL"; case SIGTRAP: return "TRAP"; case SIGABRT: return "ABRT";
  case SIGBUS: return "BUS"; case SIGFPE: return "FPE"; case SIGKILL: return "KILL";
  case SIGUSR1: return "USR1"; case SIGSEGV: return "SEGV"; case SIGUSR2: return "USR2";
  case SIGPIPE: return "PIPE"; case SIGALRM: return "ALRM"; case SIGTERM: return "TERM";
  case SIGSTKFLT: return "STKFLT"; case SIGCHLD: return "CHLD"; case SIGCONT: return "CONT";
  case SIGSTOP: return "STOP"; case SIGTSTP: return "TSTP"; case SIGTTIN: return "TTIN";
  case SIGTTOU: return "TTOU"; case SIGURG: return "URG"; case SIGXCPU: return "XCPU";
  case SIGXFSZ: return "XFSZ"; case SIGVTALRM: return "VTALRM"; case SIGPROF: return "PROF";
  case SIGWINCH: return "WINCH"; case SIGIO: return "IO"; case SIGPWR: return "PWR";
  case SIGSYS: return "SYS";
  default: return nullptr;
  }
}
#endif

std::string signal_name(int signal) {
  if (const char* abbrev = sigabbrev_np(signal)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(signal);
}

void kill_process_group(pid_t pgid, int signal) {
  if (pgid > 0) std::ignore = ::kill(-pgid, signal);
}

Result<fs::path> find_executable(const std::string& name, const std::optional<std::string>& path_var,
                                 const std::function<bool(const fs::path&)>& skip) {
  auto is_executable = [](const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (is_executable(name)) return fs::path(name);
    return fail(name + " is not an executable file");
  }
  std::string path = path_var.value_or("/usr/local/bin:/usr/bin:/bin");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (is_executable(candidate) && !(skip && skip(candidate))) return candidate;
    start = end + 1;
  }
  return fail(name + " was not found on PATH (" + path + ")");
}

bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

} // namespace npc::util

#include <dirent.h>
#include <fstream>
#include <sys/prctl.h>
#include <thread>

namespace npc::util {

void become_subreaper() { std::ignore = ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

void reap_untracked_children(const std::set<pid_t>& tracked) {
  for (;;) {
    siginfo_t info{};
    info.si_pid = 0;
    // Peek without reaping, so a tracked child's status stays for its owner.
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    if (tracked.count(info.si_pid) != 0) return;
    int status = 0;
    std::ignore = ::waitpid(info.si_pid, &status, WNOHANG);
  }
}

std::vector<ProcessEntry> list_processes() {
  std::vector<ProcessEntry> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (struct dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0, pgid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld %ld", &state, &ppid, &pgid) != 3) continue;
    found.push_back({static_cast<pid_t>(pid), static_cast<pid_t>(ppid), static_cast<pid_t>(pgid), state});
  }
  ::closedir(proc);
  return found;
}

namespace {

// Living children of `parent`: (pid, pgid) pairs.
std::vector<std::pair<pid_t, pid_t>> children_of(pid_t parent) {
  std::vector<std::pair<pid_t, pid_t>> found;
  for (const auto& p : list_processes())
    if (p.ppid == parent && p.state != 'Z') found.emplace_back(p.pid, p.pgid);
  return found;
}

} // namespace

void kill_all_descendants(int rounds) {
  pid_t self = ::getpid();
  pid_t own_group = ::getpgrp();
  for (int round = 0; round < rounds; ++round) {
    auto children = children_of(self);
    if (children.empty()) return;
    for (auto [pid, pgid] : children) {
      if (pgid != own_group && pgid > 1) std::ignore = ::kill(-pgid, SIGKILL);
      std::ignore = ::kill(pid, SIGKILL);
    }
    // Let the kills land, reap, and look again: their orphans are ours now.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (auto [pid, pgid] : children) {
      int status = 0;
      std::ignore = ::waitpid(pid, &status, WNOHANG);
    }
    reap_untracked_children({});
  }
}

} // namespace npc::util
