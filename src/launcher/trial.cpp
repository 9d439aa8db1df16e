#include <npc/launcher/trial.hpp>

#include <csignal>
#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/util/clock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/signals.hpp>

namespace npc::launcher {

namespace {

constexpr std::string_view kExtractionPrefix = "Extracting graphs (";
constexpr std::string_view kExtractionSuffix = ") for ahead-of-time parallel compilation";
// Once the trial has ended, how long descendants that still hold its output
// open may keep us reading.
constexpr double kDrainSeconds = 0.5;

// One of the trial's output streams: passed through, copied, split in lines.
struct Stream {
  int from = -1;
  int to = -1;
  std::string partial;
  bool open = true;
};

void take_lines(Stream& stream, std::string_view chunk, TrialResult& result) {
  stream.partial.append(chunk);
  size_t start = 0;
  for (;;) {
    size_t nl = stream.partial.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line = std::string_view(stream.partial).substr(start, nl - start);
    std::string path = parse_extraction_line(line);
    // Cut before its closing parenthesis: a newline in the path. A line
    // naming some other file is reported as it is, and refused by name.
    if (line.find(kExtractionPrefix) != std::string_view::npos && path.empty()) ++result.unreadable_extraction_lines;
    if (!path.empty()) result.reported_paths.push_back(std::move(path));
    start = nl + 1;
  }
  stream.partial.erase(0, start);
  // A line longer than this is no extraction line; don't hold it all.
  constexpr size_t kMaxLine = 64 * 1024;
  if (stream.partial.size() > kMaxLine) stream.partial.clear();
}

} // namespace

std::string parse_extraction_line(std::string_view line) {
  auto start = line.find(kExtractionPrefix);
  if (start == std::string_view::npos) return "";
  start += kExtractionPrefix.size();
  auto end = line.find(kExtractionSuffix, start);
  if (end == std::string_view::npos) end = line.rfind(')');
  if (end == std::string_view::npos || end <= start) return "";
  return std::string(line.substr(start, end - start));
}

TrialResult run_trial(const std::vector<std::string>& command, const util::Environment& environment,
                      const fs::path& trial_log) {
  TrialResult result;
  util::SignalWatcher signals({SIGCHLD, SIGINT, SIGTERM, SIGHUP});
  util::UniqueFd log(::open(trial_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!log.valid()) throw EnvironmentError(util::errno_text("cannot create the trial log", trial_log, errno));

  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw EnvironmentError("cannot create pipes for the trial run");
  util::UniqueFd out_read(out_pipe[0]), out_write(out_pipe[1]);
  util::UniqueFd err_read(err_pipe[0]), err_write(err_pipe[1]);

  util::SpawnOptions options;
  options.argv = command;
  options.environment = environment;
  options.output = util::OutputTo::fds;
  options.stdout_fd = out_write.get();
  options.stderr_fd = err_write.get();
  double start = util::monotonic_seconds();
  auto child = util::spawn(options);
  out_write.reset();
  err_write.reset();
  if (!child) throw EnvironmentError("cannot run the training command: " + child.error());
  pid_t pid = child->pid;
  spdlog::info("running the trial in graph-extraction mode; its output is also in {}", trial_log.string());

  Stream streams[2] = {{out_read.get(), STDOUT_FILENO, {}, true},
                       {err_read.get(), STDERR_FILENO, {}, true}};
  bool exited = false;
  double exited_at = 0, kill_at = 0;
  char buffer[1 << 16];
  while (!exited || ((streams[0].open || streams[1].open) &&
                     util::monotonic_seconds() - exited_at < kDrainSeconds)) {
    std::vector<int> fds;
    for (auto& s : streams)
      if (s.open) fds.push_back(s.from);
    int timeout_ms = exited ? 50 : (kill_at > 0 ? 50 : 1000);
    std::vector<int> ready;
    auto received = signals.wait(timeout_ms, fds, &ready);
    for (auto& s : streams) {
      if (!s.open || std::find(ready.begin(), ready.end(), s.from) == ready.end()) continue;
      ssize_t n = ::read(s.from, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        s.open = false;
        continue;
      }
      std::string_view chunk(buffer, static_cast<size_t>(n));
      std::ignore = util::write_all(s.to, chunk);
      if (log.valid() && !util::write_all(log.get(), chunk)) {
        // Said once, and the log is dropped: the line announcing the trial
        // named it as holding the output, which is no longer true.
        spdlog::warn("{}; the rest of the trial's output is not kept there",
                     util::errno_text("cannot write the trial log", trial_log, errno));
        log.reset();
      }
      take_lines(s, chunk, result);
    }
    for (int sig : received) {
      if (sig == SIGCHLD || result.interrupted_by != 0) continue;
      result.interrupted_by = sig;
      spdlog::warn("received {}; stopping the training command", util::signal_name(sig));
      util::kill_process_group(pid, sig);
      kill_at = util::monotonic_seconds() +
                std::chrono::duration<double>(kTrialInterruptGrace).count();
    }
    if (kill_at > 0 && util::monotonic_seconds() >= kill_at) {
      util::kill_process_group(pid, SIGKILL);
      util::kill_all_descendants();
      kill_at = 0;
    }
    if (!exited) {
      if (auto status = util::try_wait_child(pid)) {
        result.status = *status;
        exited = true;
        exited_at = util::monotonic_seconds();
      }
    }
    util::reap_untracked_children({pid});
  }
  // Whatever of its group is still running (a daemonised helper) ends with it.
  util::kill_process_group(pid, result.interrupted_by != 0 ? SIGKILL : SIGTERM);
  if (result.interrupted_by != 0) util::kill_all_descendants();
  result.wall_seconds = util::monotonic_seconds() - start;
  return result;
}

} // namespace npc::launcher
