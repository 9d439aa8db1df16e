#include <npc/launcher/pool_runner.hpp>

#include <csignal>
#include <unistd.h>
#include <map>
#include <set>
#include <tuple>

#include <spdlog/spdlog.h>

#include <npc/compile/worker_report.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/process.hpp>
#include <npc/util/shell_words.hpp>
#include <npc/util/signals.hpp>

// The real WorkerRunner: a neuron_cc_wrapper compile-entry process per
// attempt, waited on with the signals (signalfd), and how each ended read
// from the report it leaves.

namespace npc::launcher {

namespace {

struct Worker {
  std::size_t item = 0;
  double started = 0;
  fs::path log;
  fs::path result_file; // the worker's report (compile/worker_report.hpp)
};

std::vector<std::string> worker_argv(const RunnerConfig& config, const AttemptSpec& attempt) {
  std::vector<std::string> argv = {config.wrapper.string(), "compile-entry", attempt.entry_dir.string(),
                                   "--compiler", config.compiler.string(), "--no-evict", "--no-wait",
                                   "--result-file", attempt.result_file.string()};
  if (config.compile_timeout)
    argv.push_back("--timeout=" + std::to_string(static_cast<double>(config.compile_timeout->count()) / 1000.0));
  argv.push_back("--lock-timeout=" + std::to_string(config.stale_lock_age.count()));
  if (attempt.retry) argv.emplace_back("--retry_failed_compilation");
  if (!config.run.empty()) {
    argv.insert(argv.end(), {"--run", config.run, "--run-by", config.run_by});
    if (attempt.last_attempt) argv.emplace_back("--last-attempt");
  }
  // Told which cache, except under the launcher's lock with the graph
  // brought: a compile in the directory alone, which the launcher uploads.
  if (!attempt.shared_lock_held) argv.insert(argv.end(), config.cache_arguments.begin(), config.cache_arguments.end());
  return argv;
}

// How an attempt ended, from the report the worker left (and, when it left
// none, from how it exited).
std::pair<AttemptEnd, AttemptInfo> classify(const Worker& worker, const util::ExitStatus& status) {
  AttemptInfo info;
  info.wall_seconds = util::monotonic_seconds() - worker.started;
  info.peak_rss_bytes = status.peak_rss_bytes;
  info.log_path = worker.log;
  info.exit = "neuron_cc_wrapper " + status.describe();
  auto read = compile::read_worker_report(worker.result_file);
  std::ignore = ::unlink(worker.result_file.c_str());
  if (!read) spdlog::warn("{}", read.error());
  const compile::WorkerReport* report = read && *read ? &**read : nullptr;
  if (!report) {
    // Gone without a word: killed with its compiler (-9, the OOM killer).
    if (status.signaled && status.signal == SIGKILL) return {AttemptEnd::killed, info};
    // Done, but the report could not be written (a full disk, say).
    if (status.success()) return {AttemptEnd::already_done, info};
    return {AttemptEnd::failed, info};
  }
  if (!report->outcome) {
    info.exit = report->error; // the worker's one-line error: the cache or the compiler unusable
    info.blame = Blame::surroundings;
    return {AttemptEnd::failed, info};
  }
  if (!report->exit.empty()) {
    info.exit = report->exit;
    info.wall_seconds = report->wall_seconds;
    info.peak_rss_bytes = report->peak_rss_bytes;
  }
  if (!report->log_path.empty()) info.log_path = report->log_path;
  switch (*report->outcome) {
  case compile::EntryOutcome::compiled: return {AttemptEnd::compiled, info};
  case compile::EntryOutcome::already_done: return {AttemptEnd::already_done, info};
  case compile::EntryOutcome::locked_elsewhere: return {AttemptEnd::locked_elsewhere, info};
  case compile::EntryOutcome::removed: return {AttemptEnd::removed, info};
  // The entry is left pending (nothing cached); info.exit names the full
  // filesystem. The graph is not compiled, nor any not started by then.
  case compile::EntryOutcome::no_space:
    info.blame = Blame::surroundings;
    return {AttemptEnd::no_space, info};
  case compile::EntryOutcome::cached_failure:
    info.exit = "failed in another process"; // no new attempt: another process's result
    return {AttemptEnd::cached_failure, info};
  // Failed for good by another launcher of this run (a task of the step):
  // its failure, not a new attempt; info.exit says who failed it and how.
  case compile::EntryOutcome::failed_in_run:
    info.wall_seconds = 0;
    return {AttemptEnd::failed_in_run, info};
  // Only a kill from outside (the OOM killer) says the machine had too many
  // compiles at once; a timeout is a failure of the graph to finish. Neither
  // is cached as a failure; the log is kept beside the entry.
  case compile::EntryOutcome::killed: return {AttemptEnd::killed, info};
  case compile::EntryOutcome::timed_out:
  case compile::EntryOutcome::failed:
  case compile::EntryOutcome::interrupted: return {AttemptEnd::failed, info};
  }
  return {AttemptEnd::failed, info};
}

class ProcessRunner final : public WorkerRunner {
public:
  explicit ProcessRunner(const RunnerConfig& config)
      : config_(config), signals_({SIGCHLD, SIGINT, SIGTERM, SIGHUP}) {}

  double now() override { return util::monotonic_seconds(); }

  Status start(const AttemptSpec& attempt) override {
    util::SpawnOptions options;
    options.argv = worker_argv(config_, attempt);
    options.output = util::OutputTo::file;
    options.output_file = attempt.log;
    spdlog::debug("starting {}", util::join_shell_words(options.argv));
    auto child = util::spawn(options);
    if (!child) return fail(child.error());
    workers_.emplace(child->pid, Worker{attempt.item, now(), attempt.log, attempt.result_file});
    return ok_status();
  }

  Events wait(std::chrono::milliseconds timeout) override {
    Events events;
    // A take of a shared lock that ends (Cluster::wake_fd) ends the wait
    // too: its worker is to start.
    std::vector<int> fds;
    if (config_.cluster && config_.cluster->wake_fd() >= 0) fds.push_back(config_.cluster->wake_fd());
    for (int sig : signals_.wait(static_cast<int>(timeout.count()), fds))
      if (sig != SIGCHLD && events.interrupt == 0) events.interrupt = sig;
    if (events.interrupt != 0) return events;
    std::set<pid_t> tracked;
    for (auto it = workers_.begin(); it != workers_.end();) {
      auto status = util::try_wait_child(it->first);
      if (!status) {
        tracked.insert(it->first);
        ++it;
        continue;
      }
      auto [end, info] = classify(it->second, *status);
      events.ended.push_back({it->second.item, end, std::move(info)});
      it = workers_.erase(it);
    }
    util::reap_untracked_children(tracked);
    return events;
  }

  void stop_all(int signal) override {
    for (const auto& [pid, worker] : workers_) util::kill_process_group(pid, signal);
    double kill_at = now() + std::chrono::duration<double>(kWorkerInterruptGrace).count();
    while (!workers_.empty() && now() < kill_at) {
      std::ignore = signals_.wait(50);
      for (auto it = workers_.begin(); it != workers_.end();)
        it = util::try_wait_child(it->first) ? workers_.erase(it) : std::next(it);
    }
    for (const auto& [pid, worker] : workers_) util::kill_process_group(pid, SIGKILL);
    for (const auto& [pid, worker] : workers_) std::ignore = util::wait_child(pid);
    workers_.clear();
    util::kill_all_descendants();
  }

  std::size_t running() const override { return workers_.size(); }

private:
  const RunnerConfig& config_;
  util::SignalWatcher signals_;
  std::map<pid_t, Worker> workers_;
};

} // namespace

std::unique_ptr<WorkerRunner> make_process_runner(const RunnerConfig& config) {
  return std::make_unique<ProcessRunner>(config);
}

} // namespace npc::launcher
