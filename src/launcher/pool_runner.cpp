#include <npc/launcher/pool_runner.hpp>

#include <csignal>
#include <unistd.h>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/layout.hpp>
#include <npc/compile/cache_tiers.hpp>
#include <npc/compile/worker_report.hpp>
#include <npc/launcher/held_summary.hpp>
#include <npc/storage/lock.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/process.hpp>
#include <npc/util/shell_words.hpp>
#include <npc/util/signals.hpp>
#include <npc/util/strings.hpp>

namespace npc::launcher {

using cluster::Cluster;
using cluster::HeldEntryLook;

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
  // Under the launcher's lock, with the graph brought: a compile in the
  // directory alone, which the launcher then uploads.
  if (config.shared_cache_url && !attempt.shared_lock_held) {
    argv.emplace_back("--shared-cache");
    argv.push_back(*config.shared_cache_url);
  }
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

// Whether a locked entry's holder proves itself alive: a live process of
// this host (owner facts), or a record its holder keeps renewing, on this
// host or another that shares the directory. Such a holder is waited for: it
// ends with a result, or stops renewing (it died with its host) and its lock
// lapses within the lock's time to live, and the graph is compiled here. The
// framework's lock carries no owner facts: such an entry is left to its
// holder once nothing else is left to do, not waited for until the lock
// turns stale hours later.
enum class Holder { none, alive_here, renewing_elsewhere };
Holder holder_proves_alive(const cache::Cache& cache, const fs::path& entry_dir) {
  auto info = cache.entry(entry_dir).inspect();
  if (!info || info->state != cache::EntryState::locked) return Holder::none;
  if (info->framework_lock.state == storage::LockState::held_alive) return Holder::alive_here;
  return info->framework_lock.owner_proved_alive() ? Holder::renewing_elsewhere : Holder::none;
}

bool locked_in_mirror(const cache::Cache& cache, const fs::path& entry_dir) {
  auto info = cache.entry(entry_dir).inspect();
  return info && info->state == cache::EntryState::locked;
}

// With entries beyond this host's directory (Cluster::entries_elsewhere: a
// shared tier), an entry missing from the mirror is pending: its graph, left
// there until its compile, is the shared tier's to have or not (a worker
// that finds none reports the graph removed).
// `lease_ends`: when the lock found ends unless renewed, when its record
// says (ours; not the framework's).
Pool::Found look_at(const cache::Cache& cache, const Cluster& cluster, const fs::path& entry_dir,
                    bool* lock_blocks = nullptr, std::optional<storage::Time>* lease_ends = nullptr) {
  auto info = cache.entry(entry_dir).inspect();
  if (lock_blocks) *lock_blocks = info && info->state == cache::EntryState::locked && info->framework_lock.blocks();
  if (lease_ends && info && info->state == cache::EntryState::locked && info->framework_lock.record &&
      info->framework_lock.record->expires_unix > 0)
    *lease_ends = storage::Time(std::chrono::seconds(info->framework_lock.record->expires_unix));
  if (!info) return Pool::Found::failed;
  switch (info->state) {
  case cache::EntryState::done: return Pool::Found::done;
  case cache::EntryState::locked: return Pool::Found::locked;
  case cache::EntryState::failed: return Pool::Found::failed;
  case cache::EntryState::absent: return cluster.entries_elsewhere() ? Pool::Found::pending : Pool::Found::removed;
  default: return Pool::Found::pending;
  }
}

// Who failed a graph found failed, and how, when its record says another
// launcher of this run failed it for good; empty otherwise (a failure
// cached before the run, or by a process outside it).
std::string failed_in_run(const cache::Cache& cache, const RunnerConfig& config, const fs::path& entry_dir) {
  if (config.run.empty()) return {};
  auto meta = cache::read_entry_meta(cache.entry(entry_dir).dir());
  if (!meta) return {};
  const cache::AttemptRecord* failed = meta->failed_for_good_in(config.run);
  return failed ? cache::describe_run_failure(*failed) : std::string();
}

ProgressSnapshot snapshot(const Pool& pool, double elapsed, double now) {
  ProgressSnapshot s;
  s.total = pool.items().size();
  s.failed = pool.count(ItemState::failed);
  s.finished = pool.count(ItemState::compiled) + pool.count(ItemState::cached) +
               pool.count(ItemState::compiled_elsewhere) + pool.count(ItemState::removed_elsewhere) + s.failed;
  s.running = static_cast<std::size_t>(pool.running());
  s.parallel = pool.parallel_limit();
  s.elapsed = elapsed;
  auto work = pool.remaining_work(now);
  s.eta = work ? *work / std::max(1, pool.parallel_limit()) : -1;
  return s;
}

std::string short_name(const WorkItem& item) { return item.entry_dir.filename().string(); }

// Who holds item i's graph in this host's cache, for the lines that say
// so; nothing when no lock there holds it (let go since, or another host's
// in a shared cache, which run.cpp names as it brings the graph).
std::optional<HeldGraph> held_graph(const cache::Cache& cache, const Pool& pool, std::size_t i) {
  const WorkItem& item = pool.items()[i];
  auto holder = cache.entry(item.entry_dir).holder();
  if (!holder) return std::nullopt;
  return HeldGraph{short_name(item), holder->owner.value_or("whoever made their locks (they name no owner)"),
                   holder->described};
}

// As held_graph, for a line that names the graph in any case.
HeldGraph held_graph_or(const cache::Cache& cache, const Pool& pool, std::size_t i, const std::string& otherwise) {
  return held_graph(cache, pool, i).value_or(HeldGraph{short_name(pool.items()[i]), otherwise, otherwise});
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

// What the display says of an attempt that ended.
void tell(ProgressDisplay& progress, const Pool& pool, const AttemptEnded& ended) {
  const WorkItem& item = pool.items()[ended.item];
  const ItemProgress& p = pool.progress()[ended.item];
  const AttemptInfo& info = ended.info;
  switch (ended.end) {
  case AttemptEnd::compiled:
    progress.event("compiled " + short_name(item) + " in " + util::format_seconds(info.wall_seconds));
    break;
  case AttemptEnd::already_done:
    progress.event("compiled by another process: " + short_name(item));
    break;
  case AttemptEnd::locked_elsewhere:
    spdlog::debug("{} is held by another process; looked at again later", short_name(item));
    break;
  case AttemptEnd::removed:
    progress.event("removed by another process (not compiled): " + short_name(item));
    break;
  case AttemptEnd::cached_failure:
    progress.failure("FAILED " + short_name(item) + " (" + info.exit + "); log " + info.log_path.string());
    break;
  case AttemptEnd::failed_in_run: progress.failure("FAILED " + short_name(item) + " (" + info.exit + ")"); break;
  case AttemptEnd::no_space:
    progress.failure("FAILED " + short_name(item) + " (" + info.exit + "); no new compile starts; the graphs "
                   "not compiled stay pending for a rerun once space is freed");
    break;
  case AttemptEnd::killed:
  case AttemptEnd::failed:
    if (p.state == ItemState::retry_wait)
      progress.event("attempt " + std::to_string(p.attempts) + " of " + short_name(item) + " failed (" +
                     info.exit + "); retrying" +
                     (ended.end != AttemptEnd::killed ? ""
                      : p.alone                       ? " alone, once the compiles running now end"
                                                      : " with " + std::to_string(pool.parallel_limit()) + " at once"));
    else
      progress.failure("FAILED " + short_name(item) + " (" + info.exit + ") after " +
                     std::to_string(p.attempts) + " attempt(s); log " + info.log_path.string());
    break;
  }
}

} // namespace

std::unique_ptr<WorkerRunner> make_process_runner(const RunnerConfig& config) {
  return std::make_unique<ProcessRunner>(config);
}

PoolRunResult run_pool(Pool& pool, const cache::Cache& cache, const RunnerConfig& config,
                       ProgressDisplay& progress) {
  auto runner = make_process_runner(config);
  return run_pool(pool, cache, config, progress, *runner);
}

PoolRunResult run_pool(Pool& pool, const cache::Cache& cache, const RunnerConfig& config,
                       ProgressDisplay& progress, WorkerRunner& runner) {
  PoolRunResult result;
  double start = runner.now();
  std::set<std::size_t> waits_said; // each graph held elsewhere is named once
  std::set<std::size_t> locks_held; // shared locks this launcher holds for its running workers
  Cluster alone;
  Cluster& cluster = config.cluster ? *config.cluster : alone;

  // The worker of item i, which the pool has started.
  auto start_worker = [&](std::size_t i, bool lock_taken) {
    const WorkItem& item = pool.items()[i];
    const ItemProgress& p = pool.progress()[i];
    std::string attempt_name = short_name(item) + ".attempt" + std::to_string(p.attempts);
    AttemptSpec attempt{i, item.entry_dir, config.log_dir / (attempt_name + ".log"),
                        config.log_dir / (attempt_name + ".result.json"),
                        p.attempts > 1 || config.retry_cached_failures, lock_taken, pool.last_attempt(i)};
    // Now, not the tick's start: looks and locks in a shared cache take
    // requests, and a compile's measured time starts with its worker.
    const double started_at = runner.now();
    pool.begin(i, started_at);
    if (config.trace) config.trace->attempt_started(i, started_at);
    if (auto started = runner.start(attempt); !started) {
      if (lock_taken) cluster.attempt_ended(item.entry_dir);
      AttemptInfo info{0, "could not start: " + started.error(), 0, attempt.log, Blame::surroundings};
      pool.finish(i, AttemptEnd::failed, info, started_at);
      if (config.trace) config.trace->attempt_ended(pool, i, AttemptEnd::failed, info, started_at);
    } else if (lock_taken) {
      locks_held.insert(i);
    }
  };
  // Starts the workers of the takes ended; whether one gave its slot back.
  auto settle_takes = [&] {
    bool slot_freed = false;
    for (const auto& ended : cluster.takes_ended()) {
      const std::size_t i = ended.item;
      const double at = runner.now();
      switch (ended.take) {
      case HeldEntryLook::Take::held:
        slot_freed = true;
        pool.withdraw(i, at);
        pool.mark_held_elsewhere(i, at);
        break;
      case HeldEntryLook::Take::done:
        slot_freed = true;
        pool.withdraw(i, at);
        pool.revisit(i, Pool::Found::done, at);
        progress.event(cluster.done_elsewhere_event() + short_name(pool.items()[i]));
        break;
      case HeldEntryLook::Take::failed:
        slot_freed = true;
        pool.withdraw(i, at);
        pool.revisit(i, Pool::Found::failed, at, {}, ended.how);
        progress.failure("FAILED " + short_name(pool.items()[i]) + " (" + ended.how + ")");
        break;
      case HeldEntryLook::Take::taken: start_worker(i, true); break;
      case HeldEntryLook::Take::left_to_worker: start_worker(i, false); break;
      }
    }
    return slot_freed;
  };

  // What a look at item i's entry here found: a failure says who failed it
  // when another launcher of this run did.
  auto revisit_here = [&](std::size_t i, Pool::Found found, double at) {
    const fs::path& dir = pool.items()[i].entry_dir;
    std::string how = found == Pool::Found::failed ? failed_in_run(cache, config, dir) : std::string();
    if (!how.empty()) progress.failure("FAILED " + short_name(pool.items()[i]) + " (" + how + ")");
    pool.revisit(i, found, at, cache.entry(dir).log_path(), how);
  };
  cluster.set_run(config.run);

  bool roll_said = false;
  while (!pool.finished()) {
    double now = runner.now();
    // Launchers that joined or left the roll since its last look move the
    // shares: each launcher's own come first.
    if (auto members = cluster.members_changed(now)) {
      pool.share_among(*members, cluster.self());
      std::size_t own = 0;
      for (const auto& item : pool.items()) own += item.own_share ? 1 : 0;
      // Said once the graphs are split; alone on the roll (one host's run),
      // there is nothing to say.
      const bool first_split = !roll_said && members->size() > 1;
      roll_said = roll_said || first_split;
      spdlog::log(first_split ? spdlog::level::info : spdlog::level::debug,
                  "{} launcher(s) on this cache's roll: {} of the {} graph(s) are this one's to start first",
                  members->size(), own, pool.items().size());
    }
    // A wait that may last hours says what it waits for, once the graphs
    // others hold are all that is left: in one line (held_summary.hpp).
    if (pool.only_deferred_left()) {
      std::vector<HeldGraph> waited;
      for (std::size_t i = 0; i < pool.items().size(); ++i) {
        if (pool.progress()[i].state != ItemState::deferred || !waits_said.insert(i).second) continue;
        if (auto held = held_graph(cache, pool, i)) waited.push_back(std::move(*held));
      }
      tell_held(progress, waited, [](const HeldGraph& g) { return "waiting for " + g.graph + ", held by " + g.described; },
                "waiting for ");
    }
    const double looks_until = now + std::chrono::duration<double>(kHeldLookBudgetPerTick).count();
    // Pending here: the lock that deferred it may be another host's, which
    // only the cache they share shows (alone: still pending). Those are
    // looked at together.
    // A lock whose lease's end a look read is looked at again then, when
    // that comes sooner than its backoff (pool.hpp).
    auto look_when_lease_ends = [&](std::size_t i, const std::optional<storage::Time>& lease_ends) {
      if (!lease_ends) return;
      const double in = std::chrono::duration<double>(*lease_ends - std::chrono::system_clock::now()).count();
      pool.look_again_when_lease_ends(i, now + in, now);
    };
    std::vector<std::size_t> shared_due;
    for (std::size_t i : pool.due_revisits(now)) {
      const WorkItem& item = pool.items()[i];
      std::optional<storage::Time> lease_ends;
      Pool::Found found = look_at(cache, cluster, item.entry_dir, nullptr, &lease_ends);
      if (found == Pool::Found::pending) {
        shared_due.push_back(i);
        continue;
      }
      revisit_here(i, found, now);
      if (found == Pool::Found::locked) look_when_lease_ends(i, lease_ends);
    }
    if (!shared_due.empty()) {
      std::vector<fs::path> dirs;
      for (std::size_t i : shared_due) dirs.push_back(pool.items()[i].entry_dir);
      auto looked = cluster.look_all(dirs, [&] { return runner.now() >= looks_until; });
      for (std::size_t k = 0; k < shared_due.size(); ++k) {
        if (!looked[k]) continue; // still due: looked at next tick
        const std::size_t i = shared_due[k];
        const WorkItem& item = pool.items()[i];
        if (*looked[k] == Pool::Found::done) progress.event(cluster.done_elsewhere_event() + short_name(item));
        else if (*looked[k] == Pool::Found::failed)
          progress.failure("FAILED " + short_name(item) + " (failed on another node); log " +
                           cache.entry(item.entry_dir).log_path().string());
        pool.revisit(i, *looked[k], now, cache.entry(item.entry_dir).log_path());
        if (*looked[k] == Pool::Found::held_elsewhere) look_when_lease_ends(i, cluster.lease_ends(item.entry_dir));
      }
    }
    if (pool.only_deferred_left()) {
      std::vector<HeldGraph> left_after_timeout, left;
      for (std::size_t i = 0; i < pool.items().size(); ++i) {
        const ItemProgress& p = pool.progress()[i];
        if (p.state != ItemState::deferred) continue;
        const fs::path& dir = pool.items()[i].entry_dir;
        if (cluster.entries_elsewhere() && !locked_in_mirror(cache, dir)) {
          // Another host's lock in a shared cache, unlike the framework's
          // local one, says who holds it and until when, and its holder
          // renews it while it compiles: waiting for its result (brought
          // here when it lands) or its expiry (then compiled here) leaves
          // this host's cache and the report complete, which is what
          // pre-warming a node is for. Not yet looked at (deferred by a
          // worker a moment ago): the look comes first. A holder that renews
          // past --lock-timeout is left to itself, as a waiting wrapper
          // gives up then.
          if (!p.held_elsewhere || now - p.held_elsewhere_since < static_cast<double>(config.stale_lock_age.count()))
            continue;
          left_after_timeout.push_back(held_graph_or(cache, pool, i, "other hosts, in the shared cache"));
          pool.leave_to_lock_holder(i);
          continue;
        }
        if (const Holder holder = holder_proves_alive(cache, dir); holder != Holder::none) {
          // Another host's that renews past --lock-timeout is left to it, as above.
          if (holder == Holder::alive_here ||
              now - p.deferred_since < static_cast<double>(config.stale_lock_age.count()))
            continue;
          left_after_timeout.push_back(held_graph_or(cache, pool, i, "other hosts, in the cache"));
          pool.leave_to_lock_holder(i);
          continue;
        }
        // Let go meanwhile (done, failed, or pending again): looked at as
        // any revisit does, never left to a holder that is gone.
        if (Pool::Found found = look_at(cache, cluster, dir); found != Pool::Found::locked) {
          revisit_here(i, found, now);
          continue;
        }
        left.push_back(held_graph_or(cache, pool, i, "processes that let go since"));
        pool.leave_to_lock_holder(i);
      }
      const std::string lock_timeout = util::format_seconds(static_cast<double>(config.stale_lock_age.count()));
      tell_held(progress, left_after_timeout,
                [&](const HeldGraph& g) {
                  return "locked by another node for over " + lock_timeout + " (--lock-timeout), left to it: " + g.graph;
                },
                "locked by other nodes for over " + lock_timeout + " (--lock-timeout), left to them: ");
      tell_held(progress, left, [](const HeldGraph& g) { return "locked by another process, left to it: " + g.graph; },
                "locked by other processes, left to them: ");
      if (pool.finished()) break;
    }
    // The picks' looks have a budget of their own: late in a run most
    // graphs left in the order are done or held elsewhere, and passing them
    // (a look each, sometimes a lock's read) must not keep the loop from
    // reaping the workers that end meanwhile. What is left is picked next
    // tick, with no wait between.
    const double picks_until = runner.now() + std::chrono::duration<double>(kHeldLookBudgetPerTick).count();
    bool picks_cut = false;
    for (;;) {
      while (auto next = pool.pick(now)) {
        if (runner.now() >= picks_until) {
          picks_cut = true;
          break;
        }
        std::size_t i = *next;
        const WorkItem& item = pool.items()[i];
        const ItemProgress& p = pool.progress()[i];
        // Launchers sharing a cache all walk the graphs in about the same
        // order, so by the time one reaches a graph another has often
        // compiled it or holds it: a look settles that without a worker's
        // start (a process, the key, the lock; on S3 the same listing and
        // download as here). The look is a stat of the entry; beyond this
        // host's directory, the cluster's (on S3 the entry's listing,
        // shared_entry_look.hpp, and the result's download when it is done:
        // a LIST, not a lock taken and released around a worker that finds
        // it done). Anything else is the worker's to handle (a stale lock to
        // break, a cached failure to report).
        // A graph of this launcher's own share, once the shares are split,
        // is rarely another's: the cluster's look is spared, and on S3 the
        // take's listing finds it done if it is.
        const bool own = pool.shares_split() && item.own_share;
        if (p.attempts == 0) {
          bool blocks = false; // another process holds its lock now (not stale)
          Pool::Found found = look_at(cache, cluster, item.entry_dir, &blocks);
          bool downloaded = false;
          if (found == Pool::Found::pending && !own) {
            found = cluster.look(item.entry_dir);
            downloaded = found == Pool::Found::done;
          }
          if (found == Pool::Found::done) {
            pool.revisit(i, Pool::Found::done, now);
            progress.event((downloaded ? cluster.done_elsewhere_event() : "compiled by another process: ") +
                           short_name(item));
            continue;
          }
          if (found == Pool::Found::held_elsewhere) {
            pool.mark_held_elsewhere(i, now);
            continue;
          }
          if (found == Pool::Found::locked && blocks) {
            pool.mark_locked_elsewhere(i, now);
            continue;
          }
        }
        pool.start(i, now);
        // The slot is the take's until it ends (settle_takes); alone, the
        // take ends at once, left to the worker.
        cluster.begin_take(i, item.entry_dir);
      }
      // Takes ended: their workers start, and slots a take gave back are
      // picked for again.
      if (!settle_takes()) break;
    }
    if (config.trace) {
      config.trace->load(pool, now);
      config.trace->waits(pool, now);
    }
    if (pool.finished()) break;

    int timeout_ms = kProgressTickMs;
    if (auto due = pool.next_due(now))
      timeout_ms = std::clamp(static_cast<int>((*due - now) * 1000) + 1, 1, kProgressTickMs);
    if (picks_cut) timeout_ms = 0;
    auto events = runner.wait(std::chrono::milliseconds(timeout_ms));
    if (events.interrupt != 0) {
      result.interrupted_by = events.interrupt;
      break;
    }
    for (const auto& ended : events.ended) {
      // The worker has ended: its result goes up, then the lock goes.
      if (locks_held.erase(ended.item) > 0) cluster.attempt_ended(pool.items()[ended.item].entry_dir);
      const double at = runner.now();
      pool.finish(ended.item, ended.end, ended.info, at);
      if (config.trace) config.trace->attempt_ended(pool, ended.item, ended.end, ended.info, at);
      tell(progress, pool, ended);
    }
    if (config.trace) {
      config.trace->load(pool, runner.now());
      config.trace->waits(pool, runner.now());
    }
    double t = runner.now();
    progress.update(snapshot(pool, t - start, t));
  }

  if (result.interrupted_by != 0) {
    progress.finish();
    spdlog::warn("received {}; stopping {} compile(s)", util::signal_name(result.interrupted_by), runner.running());
    runner.stop_all(result.interrupted_by);
    for (std::size_t i : locks_held) cluster.attempt_ended(pool.items()[i].entry_dir);
  } else {
    double t = runner.now();
    progress.update(snapshot(pool, t - start, t));
    progress.finish();
  }
  // The last results go up before the run is over.
  cluster.finish();
  result.wall_seconds = runner.now() - start;
  if (config.trace) config.trace->close(pool, runner.now());
  return result;
}

} // namespace npc::launcher
