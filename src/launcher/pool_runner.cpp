#include <npc/launcher/pool_runner.hpp>

#include <csignal>
#include <ctime>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/compile/entry_compile.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/process.hpp>
#include <npc/util/shell_words.hpp>
#include <npc/util/signals.hpp>
#include <npc/util/strings.hpp>

namespace npc::launcher {

namespace {

struct Worker {
  std::size_t item = 0;
  std::time_t started_unix = 0;
  double started = 0;
  fs::path log;
};

std::vector<std::string> worker_argv(const RunnerConfig& config, const WorkItem& item, bool retry) {
  std::vector<std::string> argv = {config.wrapper.string(), "compile-entry", item.entry_dir.string(),
                                   "--compiler", config.compiler.string(), "--no-evict", "--no-wait"};
  if (config.compile_timeout)
    argv.push_back("--timeout=" + std::to_string(static_cast<double>(config.compile_timeout->count()) / 1000.0));
  argv.push_back("--lock-timeout=" + std::to_string(config.stale_lock_age.count()));
  if (retry) argv.emplace_back("--retry_failed_compilation");
  return argv;
}

// How an attempt ended, from the worker's status and the attempt record it
// left in the entry.
std::pair<AttemptEnd, AttemptInfo> classify(const Worker& worker, const util::ExitStatus& status,
                                            const WorkItem& item) {
  AttemptInfo info;
  info.wall_seconds = util::monotonic_seconds() - worker.started;
  info.peak_rss_bytes = status.peak_rss_bytes;
  info.log_path = worker.log;
  auto meta = cache::read_entry_meta(item.entry_dir);
  const cache::AttemptRecord* ours = nullptr;
  // Attempts started before ours belong to someone else; a second of slack
  // covers the coarse clock.
  if (meta && !meta->attempts.empty() && meta->attempts.back().started_unix + 1 >= worker.started_unix)
    ours = &meta->attempts.back();
  if (ours) {
    info.wall_seconds = ours->wall_seconds;
    info.peak_rss_bytes = ours->peak_rss_bytes;
    info.exit = ours->exit;
  } else {
    info.exit = "neuron_cc_wrapper " + status.describe();
  }
  if (!status.signaled && status.code == 0)
    return {ours && ours->outcome == "success" ? AttemptEnd::compiled : AttemptEnd::already_done, info};
  if (!status.signaled && status.code == compile::kExitLockedElsewhere) return {AttemptEnd::locked_elsewhere, info};
  if (ours) {
    // A timeout also ends in SIGKILL, but ours: only a kill from outside
    // (the OOM killer) says the machine had too many compiles at once.
    // Neither is cached as a failure; its log is kept beside the entry.
    bool killed_from_outside = ours->signal == "SIGKILL" && ours->outcome != "timeout";
    bool kept_pending = ours->signal == "SIGKILL" || ours->outcome == "timeout";
    info.log_path = item.entry_dir / (kept_pending ? cache::kKilledLogFile : cache::kLogFile);
    return {killed_from_outside ? AttemptEnd::killed : AttemptEnd::failed, info};
  }
  if (status.signaled && status.signal == SIGKILL) return {AttemptEnd::killed, info};
  if (!status.signaled && status.code == 1) {
    // No new attempt and a cached failure: another process's result.
    std::error_code ec;
    if (fs::exists(item.entry_dir / cache::kLogFile, ec)) {
      info.log_path = item.entry_dir / cache::kLogFile;
      info.exit = "failed in another process";
      return {AttemptEnd::cached_failure, info};
    }
  }
  return {AttemptEnd::failed, info};
}

// Whether a locked entry's holder is one we can wait for: a live process of
// this host (our flock, or owner facts proving it alive). The framework's
// lock carries no owner facts and another host's cannot be checked: such an
// entry is left to its holder once nothing else is left to do, not waited
// for until the lock turns stale hours later.
bool held_by_live_local_process(const cache::Cache& cache, const fs::path& entry_dir) {
  auto info = cache.inspect(entry_dir);
  if (!info || info->state != cache::EntryState::locked) return false;
  return info->framework_lock.state != cache::FrameworkLockState::held;
}

Pool::Found look_at(const cache::Cache& cache, const fs::path& entry_dir) {
  auto info = cache.inspect(entry_dir);
  if (!info) return Pool::Found::failed;
  switch (info->state) {
  case cache::EntryState::done: return Pool::Found::done;
  case cache::EntryState::locked: return Pool::Found::locked;
  case cache::EntryState::failed: return Pool::Found::failed;
  default: return Pool::Found::pending;
  }
}

ProgressSnapshot snapshot(const Pool& pool, double elapsed, double now) {
  ProgressSnapshot s;
  s.total = pool.items().size();
  s.failed = pool.count(ItemState::failed);
  s.finished = pool.count(ItemState::compiled) + pool.count(ItemState::cached) +
               pool.count(ItemState::compiled_elsewhere) + s.failed;
  s.running = static_cast<std::size_t>(pool.running());
  s.parallel = pool.parallel_limit();
  s.elapsed = elapsed;
  s.eta = pool.remaining_work(now) / std::max(1, pool.parallel_limit());
  return s;
}

std::string short_name(const WorkItem& item) { return item.entry_dir.filename().string(); }

} // namespace

PoolRunResult run_pool(Pool& pool, const cache::Cache& cache, const RunnerConfig& config,
                       ProgressDisplay& progress) {
  PoolRunResult result;
  util::SignalWatcher signals({SIGCHLD, SIGINT, SIGTERM, SIGHUP});
  std::map<pid_t, Worker> workers;
  double start = util::monotonic_seconds();

  while (!pool.finished()) {
    double now = util::monotonic_seconds();
    for (std::size_t i : pool.due_revisits(now))
      pool.revisit(i, look_at(cache, pool.items()[i].entry_dir), now,
                   pool.items()[i].entry_dir / cache::kLogFile);
    if (pool.only_deferred_left()) {
      for (std::size_t i = 0; i < pool.items().size(); ++i) {
        if (pool.progress()[i].state != ItemState::deferred) continue;
        if (held_by_live_local_process(cache, pool.items()[i].entry_dir)) continue;
        pool.leave_to_lock_holder(i);
        progress.event("locked by another process, left to it: " + short_name(pool.items()[i]));
      }
      if (pool.finished()) break;
    }
    while (auto next = pool.pick(now)) {
      std::size_t i = *next;
      const WorkItem& item = pool.items()[i];
      const ItemProgress& p = pool.progress()[i];
      Worker worker{i, std::time(nullptr), now,
                    config.log_dir / (short_name(item) + ".attempt" + std::to_string(p.attempts + 1) + ".log")};
      util::SpawnOptions options;
      options.argv = worker_argv(config, item, p.attempts > 0 || config.retry_cached_failures);
      options.output = util::OutputTo::file;
      options.output_file = worker.log;
      spdlog::debug("starting {}", util::join_shell_words(options.argv));
      pool.start(i, now);
      auto child = util::spawn(options);
      if (!child) {
        pool.finish(i, AttemptEnd::failed, {0, "could not start: " + child.error(), 0, worker.log}, now);
        continue;
      }
      workers.emplace(child->pid, worker);
    }
    if (pool.finished()) break;

    int timeout_ms = kProgressTickMs;
    if (auto due = pool.next_due())
      timeout_ms = std::clamp(static_cast<int>((*due - now) * 1000) + 1, 1, kProgressTickMs);
    auto received = signals.wait(timeout_ms);
    for (int sig : received) {
      if (sig != SIGCHLD && result.interrupted_by == 0) result.interrupted_by = sig;
    }
    if (result.interrupted_by != 0) break;

    std::set<pid_t> tracked;
    for (auto it = workers.begin(); it != workers.end();) {
      auto status = util::try_wait_child(it->first);
      if (!status) {
        tracked.insert(it->first);
        ++it;
        continue;
      }
      const Worker& worker = it->second;
      const WorkItem& item = pool.items()[worker.item];
      auto [end, info] = classify(worker, *status, item);
      double t = util::monotonic_seconds();
      pool.finish(worker.item, end, info, t);
      const ItemProgress& p = pool.progress()[worker.item];
      switch (end) {
      case AttemptEnd::compiled:
        progress.event("compiled " + short_name(item) + " in " + util::format_seconds(info.wall_seconds));
        break;
      case AttemptEnd::already_done:
        progress.event("compiled by another process: " + short_name(item));
        break;
      case AttemptEnd::locked_elsewhere: break;
      case AttemptEnd::cached_failure:
        progress.event("FAILED " + short_name(item) + " (" + info.exit + "); log " + info.log_path.string());
        break;
      case AttemptEnd::killed:
      case AttemptEnd::failed:
        if (p.state == ItemState::retry_wait)
          progress.event("attempt " + std::to_string(p.attempts) + " of " + short_name(item) + " failed (" +
                         info.exit + "); retrying" +
                         (end != AttemptEnd::killed ? ""
                          : p.alone         ? " alone, once the compiles running now end"
                                            : " with " + std::to_string(pool.parallel_limit()) + " at once"));
        else
          progress.event("FAILED " + short_name(item) + " (" + info.exit + ") after " +
                         std::to_string(p.attempts) + " attempt(s); log " + info.log_path.string());
        break;
      }
      it = workers.erase(it);
    }
    util::reap_untracked_children(tracked);
    double t = util::monotonic_seconds();
    progress.update(snapshot(pool, t - start, t));
  }

  if (result.interrupted_by != 0) {
    progress.finish();
    spdlog::warn("received {}; stopping {} compile(s)", util::signal_name(result.interrupted_by), workers.size());
    for (const auto& [pid, worker] : workers) util::kill_process_group(pid, result.interrupted_by);
    double kill_at = util::monotonic_seconds() + std::chrono::duration<double>(kWorkerInterruptGrace).count();
    while (!workers.empty() && util::monotonic_seconds() < kill_at) {
      std::ignore = signals.wait(50);
      for (auto it = workers.begin(); it != workers.end();)
        it = util::try_wait_child(it->first) ? workers.erase(it) : std::next(it);
    }
    for (const auto& [pid, worker] : workers) util::kill_process_group(pid, SIGKILL);
    for (const auto& [pid, worker] : workers) std::ignore = util::wait_child(pid);
    util::kill_all_descendants();
  } else {
    progress.update(snapshot(pool, util::monotonic_seconds() - start, util::monotonic_seconds()));
    progress.finish();
  }
  result.wall_seconds = util::monotonic_seconds() - start;
  return result;
}

} // namespace npc::launcher
